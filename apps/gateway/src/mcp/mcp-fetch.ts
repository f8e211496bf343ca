import { IncomingMessage } from 'node:http';
import { Readable, Transform } from 'node:stream';
import { DomainRules, EgressGuard, FetchFailedError, requestCheckedAddress } from '@app/egress';

/** What the MCP SDK's transports call to reach a server (its `FetchLike`). */
export type McpFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

export interface McpFetchLimits {
  /** From sending the request to the response's headers. */
  headersTimeoutMs: number;
  /** Bytes one response body may carry (an SSE stream counts all its events). */
  maxResponseBytes: number;
}

/** Statuses whose Response may not have a body. */
const NULL_BODY = new Set([101, 204, 205, 304]);

/**
 * A `fetch` for the MCP SDK's HTTP transports that goes through the egress guard: the host is
 * resolved and checked (private addresses only when RUNBOX_ALLOW_PRIVATE_HOSTS allows them,
 * and the tenant's domain rules), and the socket opens to the checked address itself, so a
 * refused server never sees a connection. Unlike `guardedFetch`, the body is streamed (MCP
 * answers and notifications arrive as server-sent events), bounded in bytes; redirects are
 * not followed (an MCP endpoint does not move, and a redirect could lead past the check).
 */
export function mcpFetch(guard: EgressGuard, rules: () => Promise<DomainRules>, limits: McpFetchLimits): McpFetch {
  return async (url, init = {}) => {
    const target = await guard.checkUrl(String(url), await rules());
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = typeof init.body === 'string' || init.body == null ? (init.body ?? undefined) : undefined;
    if (init.body != null && body === undefined) throw new TypeError('MCP requests carry JSON text bodies only');
    const res = await send(target.url, target.address, { method: init.method ?? 'GET', headers, body, signal: init.signal ?? undefined }, limits.headersTimeoutMs);
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
      else if (value !== undefined) responseHeaders.set(name, value);
    }
    const status = res.statusCode ?? 502;
    if (NULL_BODY.has(status)) {
      res.resume();
      return new Response(null, { status, headers: responseHeaders });
    }
    const bounded = res.pipe(byteLimit(limits.maxResponseBytes, target.url.host));
    res.on('error', (err) => bounded.destroy(err));
    return new Response(Readable.toWeb(bounded) as ReadableStream<Uint8Array>, { status, statusText: res.statusMessage, headers: responseHeaders });
  };
}

/** The request to the checked address, given `headersTimeoutMs` to answer with its headers (the body may stream on). */
async function send(
  url: URL,
  address: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal },
  headersTimeoutMs: number,
): Promise<IncomingMessage> {
  const headersDeadline = new AbortController();
  const timer = setTimeout(
    () => headersDeadline.abort(new FetchFailedError('timeout', `${url.host} did not answer within ${headersTimeoutMs / 1000} s`)),
    headersTimeoutMs,
  );
  const signal = init.signal ? AbortSignal.any([init.signal, headersDeadline.signal]) : headersDeadline.signal;
  try {
    return await requestCheckedAddress(url, address, { ...init, signal });
  } catch (err) {
    if (err instanceof TypeError) throw err;
    if (headersDeadline.signal.aborted) throw headersDeadline.signal.reason;
    if ((err as Error).name === 'AbortError') throw err;
    throw new FetchFailedError('connection_failed', `${url.host}: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

/** Passes bytes through until `max`, then fails the stream (the SDK sees a broken response). */
function byteLimit(max: number, host: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > max) done(new Error(`${host} sent more than ${max} bytes in one response`));
      else done(null, chunk);
    },
  });
}
