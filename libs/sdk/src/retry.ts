/** When to try a call again, and how long to wait first. */
export interface RetryPolicy {
  /** Tries after the first (default 2). */
  maxRetries: number;
  /** First backoff (default 500 ms); doubles each try, with jitter, up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 2, baseDelayMs: 500, maxDelayMs: 8_000 };

/** A Retry-After longer than this is not waited out: the error goes to the caller. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * The wait before try number `attempt` (1 = the first retry): what the server's Retry-After
 * says when it says something usable, exponential backoff with full jitter otherwise.
 * Returns undefined when the server asks for longer than MAX_RETRY_AFTER_MS.
 */
export function retryDelayMs(attempt: number, policy: RetryPolicy, retryAfter: string | null, now = Date.now(), random = Math.random): number | undefined {
  const asked = parseRetryAfterMs(retryAfter, now);
  if (asked !== undefined) return asked > MAX_RETRY_AFTER_MS ? undefined : asked;
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Retry-After as seconds or an HTTP date, in milliseconds from now. */
export function parseRetryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
