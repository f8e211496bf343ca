/** nats.js error codes for a server that is away for a moment (a node restarting, the client reconnecting, a stream electing its leader). */
const UNAVAILABLE_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_DRAINING', 'DISCONNECT', 'CONNECTION_REFUSED', 'CONNECTION_TIMEOUT', 'TIMEOUT', '503']);

/**
 * True when `err` (or its cause) says NATS could not be reached or did not answer in time,
 * as opposed to a message it refused: worth a 503 and a later retry. A tool call's own
 * timeout is not this: it is raised as NatsTimeoutError, whose outcome is unknown.
 */
export function isNatsUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { name, code } = e as { name?: unknown; code?: unknown };
    if (name === 'NatsError' && typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
