import { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { requestCheckedAddress } from './checked-request';
import { DomainRules } from './domain-rules';
import { EgressGuard, EgressRefusedError } from './egress-guard';

export interface GuardedFetchOptions {
  rules: DomainRules;
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  /** For the whole exchange, redirects included. */
  timeoutMs: number;
  /** Bytes of (decoded) body kept; the rest is not read. */
  maxBytes: number;
  /**
   * Redirects followed (each one checked again); 0 returns a redirect as it is, for a caller
   * that follows it itself (the browser, whose next request is checked again).
   */
  maxRedirects: number;
  signal?: AbortSignal;
}

export interface GuardedResponse {
  /** The URL that answered, after redirects. */
  url: string;
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body was longer than maxBytes and was cut there. */
  truncated: boolean;
  /** Every URL that redirected, in order. */
  redirects: string[];
  /** The address connected to for the final response. */
  address: string;
}

/** The exchange timed out, was aborted, or the connection failed. */
export class FetchFailedError extends Error {
  constructor(
    readonly code: 'timeout' | 'aborted' | 'too_many_redirects' | 'connection_failed',
    message: string,
  ) {
    super(message);
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * An HTTP(S) request through the egress guard: the host is resolved and checked, the socket
 * opens to the checked address itself (TLS still verifies the certificate against the host
 * name), and every redirect is checked the same way before it is followed. Refusals throw
 * EgressRefusedError; timeouts and network failures FetchFailedError.
 */
export async function guardedFetch(guard: EgressGuard, url: string, options: GuardedFetchOptions): Promise<GuardedResponse> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const redirects: string[] = [];
  let current = url;
  let method = options.method ?? 'GET';
  let body = options.body;
  let headers = { ...options.headers };
  for (;;) {
    const target = await guard.checkUrl(current, options.rules);
    if (signal.aborted) throw abortError(deadline, options.timeoutMs);
    const res = await request(target.url, target.address, { method, headers, body, signal }, deadline, options.timeoutMs);
    const location = res.headers.location;
    if (REDIRECTS.has(res.statusCode ?? 0) && location && options.maxRedirects > 0) {
      res.resume();
      if (redirects.length >= options.maxRedirects) {
        throw new FetchFailedError('too_many_redirects', `more than ${options.maxRedirects} redirects (last to ${location.slice(0, 200)})`);
      }
      redirects.push(current);
      let next: URL;
      try {
        next = new URL(location, target.url);
      } catch {
        throw new EgressRefusedError('invalid_url', `redirect to an invalid URL: ${location.slice(0, 200)}`);
      }
      // Credentials are for the origin they were given to, never for where it redirects.
      if (next.origin !== target.url.origin) headers = withoutCredentials(headers);
      if (res.statusCode === 303 || ((res.statusCode === 301 || res.statusCode === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      current = next.toString();
      continue;
    }
    const { bytes, truncated } = await readBounded(decoded(res), options.maxBytes, signal, deadline, options.timeoutMs);
    return { url: current, status: res.statusCode ?? 0, headers: res.headers, body: bytes, truncated, redirects, address: target.address };
  }
}

async function request(
  url: URL,
  address: string,
  init: { method: string; headers: Record<string, string>; body?: Buffer | string; signal: AbortSignal },
  deadline: AbortSignal,
  timeoutMs: number,
): Promise<IncomingMessage> {
  try {
    return await requestCheckedAddress(url, address, { ...init, headers: { 'accept-encoding': 'gzip, deflate, br', ...init.headers } });
  } catch (err) {
    // A request Node refuses to build (a header it cannot send) is the caller's error, not the connection's.
    if (err instanceof TypeError) throw err;
    if (init.signal.aborted) throw abortError(deadline, timeoutMs);
    throw new FetchFailedError('connection_failed', `${url.host}: ${(err as Error).message}`);
  }
}

function decoded(res: IncomingMessage): Readable {
  const encoding = String(res.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (encoding === 'gzip' || encoding === 'x-gzip') return res.pipe(zlib.createGunzip());
  if (encoding === 'deflate') return res.pipe(zlib.createInflate());
  if (encoding === 'br') return res.pipe(zlib.createBrotliDecompress());
  return res;
}

/** Reads at most maxBytes (after decompression, so a small bomb cannot grow past it). */
async function readBounded(
  stream: Readable,
  maxBytes: number,
  signal: AbortSignal,
  deadline: AbortSignal,
  timeoutMs: number,
): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  const onAbort = () => stream.destroy(abortError(deadline, timeoutMs));
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      if (size + buf.length > maxBytes) {
        chunks.push(buf.subarray(0, maxBytes - size));
        stream.destroy();
        return { bytes: Buffer.concat(chunks), truncated: true };
      }
      chunks.push(buf);
      size += buf.length;
    }
  } catch (err) {
    if (err instanceof FetchFailedError) throw err;
    if (signal.aborted) throw abortError(deadline, timeoutMs);
    throw new FetchFailedError('connection_failed', `reading the response: ${(err as Error).message}`);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  return { bytes: Buffer.concat(chunks), truncated: false };
}

function abortError(deadline: AbortSignal, timeoutMs: number): FetchFailedError {
  return deadline.aborted
    ? new FetchFailedError('timeout', `no complete answer within ${timeoutMs / 1000} s`)
    : new FetchFailedError('aborted', 'the request was cancelled');
}

function withoutCredentials(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !['authorization', 'cookie', 'proxy-authorization'].includes(k.toLowerCase())));
}
