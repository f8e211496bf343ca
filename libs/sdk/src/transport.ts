import { apiErrorFrom, ConnectionError, RateLimitError } from './errors';
import { RetryPolicy, retryDelayMs, sleep } from './retry';
import { SDK_VERSION } from './version';

/** Options every call takes. */
export interface RequestOptions {
  /** Aborts the call (and any retry wait); the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Extra headers for this call. */
  headers?: Record<string, string>;
  /** Overrides the client's retry count for this call. */
  maxRetries?: number;
}

export type QueryValue = string | number | boolean | undefined;

export interface ApiRequest extends RequestOptions {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is (file uploads). A stream body cannot be sent twice, so it is never retried. */
  body?: Uint8Array | Blob | string | ReadableStream<Uint8Array>;
  /** Makes a POST safe to send again (the server answers a repeat with the first result). */
  idempotencyKey?: string;
}

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  retry: RetryPolicy;
  fetch: typeof fetch;
}

const IDEMPOTENT_METHODS = new Set(['GET', 'PUT', 'DELETE']);
/** Statuses that say nothing was done and a later try may work. */
const RETRY_STATUSES_IF_IDEMPOTENT = new Set([502, 503, 504]);

/**
 * Sends requests to the API: auth, JSON, typed errors, and retries. A 429 is always tried
 * again (the server refused before doing anything), after its Retry-After; a connection error
 * or a 502/503/504 only when sending the request twice is harmless: GET, PUT and DELETE, and
 * POSTs that carry an Idempotency-Key.
 */
export class Transport {
  constructor(readonly options: TransportOptions) {}

  /** The response of a successful call (2xx); an error status throws the typed ApiError. */
  async send(req: ApiRequest): Promise<Response> {
    const maxRetries = req.maxRetries ?? this.options.retry.maxRetries;
    const replayable = !(req.body instanceof ReadableStream);
    const idempotent = replayable && (IDEMPOTENT_METHODS.has(req.method) || req.idempotencyKey !== undefined);
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.options.fetch(this.url(req.path, req.query), this.init(req));
      } catch (err) {
        if (req.signal?.aborted) throw req.signal.reason;
        const error = new ConnectionError(`could not reach Runbox at ${this.options.baseUrl}: ${describe(err)}`, { cause: err });
        if (!idempotent || attempt >= maxRetries) throw error;
        await sleep(retryDelayMs(attempt + 1, this.options.retry, null)!, req.signal);
        continue;
      }
      if (res.ok) return res;
      const retryable = res.status === 429 || (idempotent && RETRY_STATUSES_IF_IDEMPOTENT.has(res.status));
      const delay = retryable && attempt < maxRetries ? retryDelayMs(attempt + 1, this.options.retry, res.headers.get('retry-after')) : undefined;
      if (delay === undefined) throw await errorOf(res);
      await res.body?.cancel().catch(() => undefined);
      await sleep(delay, req.signal);
    }
  }

  /** A call whose answer is JSON (or nothing, for 204). */
  async json<T>(req: ApiRequest): Promise<T> {
    const res = await this.send(req);
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    const url = new URL(this.options.baseUrl.replace(/\/+$/, '') + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  private init(req: ApiRequest): RequestInit & { duplex?: 'half' } {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.options.apiKey}`,
      'user-agent': `runbox-sdk-typescript/${SDK_VERSION}`,
      ...req.headers,
    };
    let body: RequestInit['body'];
    if (req.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.json);
    } else if (req.body !== undefined) {
      headers['content-type'] ??= 'application/octet-stream';
      body = req.body as RequestInit['body'];
    }
    if (req.idempotencyKey !== undefined) headers['idempotency-key'] = req.idempotencyKey;
    // A stream body needs half duplex in Node's fetch.
    return { method: req.method, headers, body, signal: req.signal, ...(req.body instanceof ReadableStream ? { duplex: 'half' as const } : {}) };
  }
}

async function errorOf(res: Response) {
  const text = await res.text().catch(() => '');
  const error = apiErrorFrom(res.status, text, res.headers.get('x-request-id') ?? undefined);
  if (error instanceof RateLimitError) {
    const seconds = Number(res.headers.get('retry-after'));
    if (Number.isFinite(seconds) && seconds >= 0) error.retryAfterSeconds = seconds;
  }
  return error;
}

function describe(err: unknown): string {
  // By shape: fetch's errors may come from another realm, where instanceof Error fails.
  const { message, cause } = (typeof err === 'object' && err !== null ? err : {}) as { message?: unknown; cause?: { message?: unknown } };
  if (typeof message !== 'string') return String(err);
  return typeof cause?.message === 'string' ? `${message} (${cause.message})` : message;
}
