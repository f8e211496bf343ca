import { isIP, connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import WebSocket from 'ws';
import { DomainRules } from './domain-rules';
import { EgressGuard, EgressRefusedError } from './egress-guard';
import { FetchFailedError } from './guarded-fetch';

export interface GuardedWebSocketOptions {
  rules: DomainRules;
  /** Subprotocols offered in the handshake (Sec-WebSocket-Protocol). */
  protocols?: string[];
  headers?: Record<string, string>;
  /** The opening handshake, from the check to the server's answer. */
  timeoutMs: number;
  /** The largest message taken from the server; a longer one closes the connection (1009). */
  maxMessageBytes: number;
}

/**
 * A WebSocket client connection (ws: or wss:) through the egress guard: the host is resolved
 * and checked like an HTTP request's, and the TCP connection opens to the checked address
 * itself (TLS still verifies the certificate against the host name), never to a second
 * lookup of the name. A redirect in the handshake is not followed. Resolves once the
 * connection is open; refusals throw EgressRefusedError, a failed handshake FetchFailedError.
 */
export async function guardedWebSocket(guard: EgressGuard, url: string, options: GuardedWebSocketOptions): Promise<WebSocket> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EgressRefusedError('invalid_url', `not a valid URL: ${url.slice(0, 200)}`);
  }
  if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:') {
    throw new EgressRefusedError('scheme_not_allowed', `only ws and wss URLs open WebSockets, not ${parsed.protocol}`);
  }
  const secure = parsed.protocol === 'wss:';
  const port = parsed.port ? Number(parsed.port) : secure ? 443 : 80;
  const target = await guard.checkHost(parsed.hostname, port, options.rules);
  const servername = isIP(target.hostname) ? undefined : target.hostname;

  const socket = new WebSocket(parsed, options.protocols ?? [], {
    headers: options.headers,
    handshakeTimeout: options.timeoutMs,
    maxPayload: options.maxMessageBytes,
    // Compressed frames would let a small message inflate in memory; plain frames only.
    perMessageDeflate: false,
    followRedirects: false,
    createConnection: () => (secure ? tlsConnect({ host: target.address, port, servername }) : netConnect({ host: target.address, port })),
  });
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => {
      socket.off('open', opened);
      socket.terminate();
      reject(new FetchFailedError('connection_failed', `${parsed.host}: ${err.message}`));
    };
    const opened = () => {
      socket.off('error', failed);
      resolve(socket);
    };
    socket.once('open', opened);
    socket.once('error', failed);
  });
}
