import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/** The header that carries a correlation id: on HTTP requests and responses, and on NATS messages. */
export const REQUEST_ID_HEADER = 'X-Request-Id';

/** Longest id taken from outside; a longer one is replaced, never cut (a cut id matches nothing). */
export const MAX_REQUEST_ID_CHARS = 128;

/**
 * Letters, digits and the punctuation ids commonly use (UUIDs, ULIDs, W3C trace ids, base64).
 * Nothing that could break a log line, a header or a metrics label: no spaces, quotes or controls.
 */
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:+/=-]+$/;

/** The id when it is one Runbox accepts from outside, undefined otherwise. */
export function acceptRequestId(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_REQUEST_ID_CHARS) return undefined;
  return REQUEST_ID_PATTERN.test(raw) ? raw : undefined;
}

/** A fresh id, for a request that came without a usable one. */
export function newRequestId(): string {
  return randomUUID();
}

const context = new AsyncLocalStorage<string>();

/**
 * Runs `work` with `requestId` as the current correlation id: every log line written while
 * it runs (and in what it awaits) carries it, and every NATS request it sends passes it on.
 * Without an id, `work` runs with none (not with the caller's).
 */
export function withRequestId<T>(requestId: string | undefined | null, work: () => T): T {
  return requestId ? context.run(requestId, work) : context.exit(work);
}

/** The correlation id of the work going on now, if it has one. */
export function currentRequestId(): string | undefined {
  return context.getStore();
}
