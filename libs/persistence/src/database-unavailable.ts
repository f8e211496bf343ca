/**
 * Messages of errors that mean "PostgreSQL cannot be reached right now" (stopped,
 * restarting, refusing connections, or the connection dropped), from pg, the Prisma driver
 * adapter or Prisma itself.
 */
const UNAVAILABLE_MESSAGE =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|Connection terminated|connection is closed|Can't reach database|the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)|terminating connection due to administrator command|server closed the connection unexpectedly|Client has encountered a connection error|timeout exceeded when trying to connect|^timeout expired$|too many clients|CONNECTION_CLOSED/i;

/** Prisma's codes for an unreachable or timed-out database, and SQLSTATE classes 08 (connection) and 57P (shutdown). */
const UNAVAILABLE_CODE = /^(P1001|P1002|P1008|P1017|P2024|08\d{3}|57P0[123]|53300)$/;

/** The Prisma driver adapter's kinds for the same (DriverAdapterError's cause). */
const UNAVAILABLE_KIND = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);

/**
 * True when `err` (or what caused it) says the database is unreachable for now, not that
 * the query was wrong: the request gets a 503 and may be tried again, a run worker waits
 * for the database rather than failing the run.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 6; depth++) {
    const { name, code, message, kind, originalCode } = e as { name?: unknown; code?: unknown; message?: unknown; kind?: unknown; originalCode?: unknown };
    if (name === 'PrismaClientInitializationError') return true;
    if (typeof code === 'string' && UNAVAILABLE_CODE.test(code)) return true;
    if (typeof originalCode === 'string' && UNAVAILABLE_CODE.test(originalCode)) return true;
    if (typeof kind === 'string' && UNAVAILABLE_KIND.has(kind)) return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
