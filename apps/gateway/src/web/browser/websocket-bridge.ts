import { DomainRules, EgressGuard, EgressRefusedError, guardedWebSocket } from '@app/egress';
import type { WebSocketRoute } from 'playwright-core';
import type WebSocket from 'ws';
import { USER_AGENT } from '../outbound';
import type { BlockedRequest } from './guarded-routing';

/** WebSockets one session's pages may hold open at once. */
export const MAX_SOCKETS_PER_SESSION = 16;
const HANDSHAKE_TIMEOUT_MS = 30_000;
/** The largest message passed either way. */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Bytes the server has not taken yet; past this the page is sending faster than it can go. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * Carries a page's WebSockets through the egress guard. Chromium never opens them: Playwright
 * hands each one to the gateway (routeWebSocket, without connectToServer, which would have
 * the page connect by itself), the gateway opens its own connection to the checked address
 * and passes messages between the two. The page's socket opens only once the server's has.
 *
 * The gateway's connection carries no cookies and no Origin: a context-wide route cannot tell
 * which page or frame opened the socket, and sending the session's cookies on a socket any
 * page may open would let one site's script act with the session's login on another.
 */
export class WebSocketBridge {
  private readonly open = new Set<WebSocket>();

  constructor(
    private readonly guard: EgressGuard,
    private readonly rules: () => DomainRules,
    private readonly onBlocked: (b: BlockedRequest) => void,
  ) {}

  async handle(route: WebSocketRoute): Promise<void> {
    const url = route.url();
    if (this.open.size >= MAX_SOCKETS_PER_SESSION) {
      this.onBlocked({ url, kind: 'websocket', reason: `${MAX_SOCKETS_PER_SESSION} WebSockets are open in this session already` });
      return route.close({ code: 1008, reason: 'too many WebSockets' });
    }
    // The page may give up (close, navigate) while the handshake is under way.
    let pageClosed = false;
    route.onClose(() => (pageClosed = true));
    let upstream: WebSocket;
    try {
      upstream = await guardedWebSocket(this.guard, url, {
        rules: this.rules(),
        protocols: route.protocols(),
        headers: { 'user-agent': USER_AGENT },
        timeoutMs: HANDSHAKE_TIMEOUT_MS,
        maxMessageBytes: MAX_MESSAGE_BYTES,
      });
    } catch (err) {
      if (err instanceof EgressRefusedError) {
        this.onBlocked({ url, kind: 'websocket', reason: err.message });
        return route.close({ code: 1008, reason: 'blocked' });
      }
      // As a browser reports a connection that never opened.
      return route.close({ code: 1006, reason: '' });
    }
    if (pageClosed) {
      upstream.terminate();
      return;
    }
    this.connect(route, upstream);
  }

  /** Ends every connection (the context is closing). */
  closeAll(): void {
    for (const socket of this.open) socket.terminate();
    this.open.clear();
  }

  private connect(route: WebSocketRoute, upstream: WebSocket): void {
    this.open.add(upstream);
    route.onMessage((message) => {
      const size = typeof message === 'string' ? Buffer.byteLength(message) : message.length;
      if (size > MAX_MESSAGE_BYTES || upstream.bufferedAmount > MAX_BUFFERED_BYTES) {
        upstream.terminate();
        return;
      }
      upstream.send(message);
    });
    route.onClose((code, reason) => {
      try {
        upstream.close(sendableCode(code), reason);
      } catch {
        // A close reason longer than the protocol allows.
        upstream.terminate();
      }
    });
    upstream.on('message', (data, isBinary) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
      route.send(isBinary ? bytes : bytes.toString('utf8'));
    });
    upstream.on('error', () => upstream.terminate());
    upstream.once('close', (code, reason) => {
      this.open.delete(upstream);
      // A message over the limit ends with 1009, which the page sees as it would from a browser.
      void route.close({ code, reason: reason.toString('utf8') });
    });
  }
}

/** Codes a client may put in a close frame; others (1005 "none given" ...) mean none. */
function sendableCode(code: number | undefined): number | undefined {
  return code !== undefined && (code === 1000 || (code >= 3000 && code <= 4999)) ? code : undefined;
}
