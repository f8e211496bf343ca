import { JSONCodec } from 'nats';

/** How every NATS payload Runbox sends is encoded: JSON, one codec for both services. */
export const jsonCodec = JSONCodec<unknown>();

/** The payload read as JSON, or undefined when it is not JSON (the caller's schema then refuses it). */
export function decodeJson(data: Uint8Array): unknown {
  try {
    return jsonCodec.decode(data);
  } catch {
    return undefined;
  }
}
