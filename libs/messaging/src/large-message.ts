import { createInbox, NatsConnection, Subscription } from 'nats';
import { z } from 'zod';

/**
 * Messages larger than the server's max_payload travel in pieces, pulled by the receiver.
 *
 * The sender keeps the encoded bytes, answers chunk requests on a private inbox subject and
 * sends, in place of the message, a small envelope naming that subject and the total size.
 * The receiver fetches the chunks in order, checks the size, and only then decodes: the
 * handler (a write_file, say) sees the whole message or nothing, never a part of it.
 *
 * Pulling rather than pushing means the pieces always reach the process that took the
 * message, whichever member of a queue group that was, and that nothing is sent to a
 * receiver that has given up.
 */

/** No message, however it travels, may exceed this once assembled: the receiver holds it in memory. */
export const MAX_LARGE_MESSAGE_BYTES = 256 * 1024 * 1024;

/** How long a receiver has to fetch each chunk, and a sender keeps offering them. */
const CHUNK_TIMEOUT_MS = 15_000;

const ENVELOPE_KEY = '$runbox_large_message';

const envelopeSchema = z.object({
  [ENVELOPE_KEY]: z.object({
    subject: z.string().min(1).max(256),
    bytes: z.number().int().positive(),
    chunk_bytes: z.number().int().positive(),
  }),
});

const chunkRequestSchema = z.object({ index: z.number().int().min(0) });

/** The message or its pieces could not travel: too large even in pieces, or a piece went missing. */
export class LargeMessageError extends Error {}

export interface LargeMessageOptions {
  /** The most this message may take (its contract's limit, at most MAX_LARGE_MESSAGE_BYTES). */
  maxBytes: number;
  /** Bytes one piece may take (below the server's max_payload). */
  chunkBytes: number;
  /** How long the sender keeps offering the pieces. */
  offerMs: number;
}

/**
 * Offers `bytes` for fetching in pieces and returns the envelope to send instead. The offer
 * ends when the last piece is fetched or after `offerMs`, whichever is first.
 */
export function offerLargeMessage(connection: NatsConnection, bytes: Uint8Array, options: LargeMessageOptions): Uint8Array {
  const maxBytes = Math.min(options.maxBytes, MAX_LARGE_MESSAGE_BYTES);
  if (bytes.length > maxBytes) throw new LargeMessageError(`a message of ${bytes.length} bytes is over its ${maxBytes}-byte limit`);
  const subject = createInbox();
  const chunks = Math.ceil(bytes.length / options.chunkBytes);
  const end = () => {
    clearTimeout(timer);
    if (!sub.isClosed()) sub.unsubscribe();
  };
  const sub: Subscription = connection.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      const request = parseJson(msg.data, chunkRequestSchema);
      if (!request || request.index >= chunks) {
        msg.respond(new Uint8Array(0));
        return;
      }
      const start = request.index * options.chunkBytes;
      msg.respond(bytes.subarray(start, start + options.chunkBytes));
      if (request.index === chunks - 1) end();
    },
  });
  // A receiver that gave up, or died, must not leave the bytes held for ever.
  const timer = setTimeout(() => end(), options.offerMs);
  timer.unref();
  const envelope = { [ENVELOPE_KEY]: { subject, bytes: bytes.length, chunk_bytes: options.chunkBytes } };
  return new TextEncoder().encode(JSON.stringify(envelope));
}

/** True when `data` is an envelope rather than a message: cheap, looks at the first bytes only. */
export function isLargeMessageEnvelope(data: Uint8Array): boolean {
  const prefix = `{"${ENVELOPE_KEY}"`;
  if (data.length < prefix.length || data.length > 1024) return false;
  return new TextDecoder().decode(data.subarray(0, prefix.length)) === prefix;
}

/** Fetches every piece an envelope names and returns the whole message's bytes. */
export async function fetchLargeMessage(connection: NatsConnection, data: Uint8Array, limit = MAX_LARGE_MESSAGE_BYTES): Promise<Uint8Array> {
  const parsed = parseJson(data, envelopeSchema);
  if (!parsed) throw new LargeMessageError('a large-message envelope was malformed');
  const { subject, bytes, chunk_bytes } = parsed[ENVELOPE_KEY];
  const maxBytes = Math.min(limit, MAX_LARGE_MESSAGE_BYTES);
  if (bytes > maxBytes) throw new LargeMessageError(`a message of ${bytes} bytes is over its ${maxBytes}-byte limit`);
  const whole = new Uint8Array(bytes);
  let filled = 0;
  for (let index = 0; filled < bytes; index++) {
    let piece: Uint8Array;
    try {
      const reply = await connection.request(subject, new TextEncoder().encode(JSON.stringify({ index })), { timeout: CHUNK_TIMEOUT_MS });
      piece = reply.data;
    } catch (err) {
      throw new LargeMessageError(`piece ${index} of a ${bytes}-byte message did not arrive: ${err instanceof Error ? err.message : String(err)}`);
    }
    const expected = Math.min(chunk_bytes, bytes - filled);
    if (piece.length !== expected) throw new LargeMessageError(`piece ${index} of a ${bytes}-byte message had ${piece.length} bytes, not ${expected}`);
    whole.set(piece, filled);
    filled += piece.length;
  }
  return whole;
}

function parseJson<T>(data: Uint8Array, schema: z.ZodType<T>): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
