import { DomainRules, EgressGuard, EgressRefusedError, FetchFailedError, guardedFetch } from '@app/egress';
import type { BrowserContext, Route } from 'playwright-core';
import { WebSocketBridge } from './websocket-bridge';

/** A request of the page that did not leave the machine, and why. */
export interface BlockedRequest {
  url: string;
  kind: string;
  reason: string;
}

const RESOURCE_MAX_BYTES = 20 * 1024 * 1024;
const RESOURCE_TIMEOUT_MS = 30_000;
/** Headers that describe the bytes on the wire, which guardedFetch has already decoded. */
const WIRE_HEADERS = new Set(['content-encoding', 'content-length', 'transfer-encoding', 'connection', 'keep-alive']);

/**
 * Routes every request a context's pages make (documents, subresources, fetch/XHR) through
 * the egress guard: the gateway fetches it from the checked address and hands Chromium the
 * answer, so Chromium itself never opens a connection or resolves a name (it is launched
 * with a dead proxy and no resolver as a backstop). Redirects come back to Chromium as they
 * are and its next request is routed again. WebSockets go through the same guard by way of
 * the returned bridge, which the caller closes with the context.
 */
export async function routeThroughGuard(
  context: BrowserContext,
  guard: EgressGuard,
  rules: () => DomainRules,
  onBlocked: (b: BlockedRequest) => void,
): Promise<WebSocketBridge> {
  const sockets = new WebSocketBridge(guard, rules, onBlocked);
  await context.route('**/*', (route) => fulfil(route, guard, rules(), onBlocked));
  await context.routeWebSocket(/.*/, (ws) => sockets.handle(ws));
  return sockets;
}

async function fulfil(route: Route, guard: EgressGuard, rules: DomainRules, onBlocked: (b: BlockedRequest) => void): Promise<void> {
  const request = route.request();
  const url = request.url();
  if (url.startsWith('data:') || url.startsWith('blob:') || url === 'about:blank') return route.continue();
  try {
    const headers = await request.allHeaders();
    delete headers.host;
    delete headers['accept-encoding'];
    const res = await guardedFetch(guard, url, {
      rules,
      method: request.method(),
      headers,
      body: request.postDataBuffer() ?? undefined,
      timeoutMs: RESOURCE_TIMEOUT_MS,
      maxBytes: RESOURCE_MAX_BYTES,
      maxRedirects: 0,
    });
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) {
      if (v === undefined || WIRE_HEADERS.has(k)) continue;
      // Playwright takes several Set-Cookie values joined by newlines.
      out[k] = Array.isArray(v) ? v.join('\n') : v;
    }
    await route.fulfill({ status: res.status, headers: out, body: res.body });
  } catch (err) {
    if (err instanceof EgressRefusedError) {
      onBlocked({ url, kind: request.resourceType(), reason: err.message });
      return route.abort('blockedbyclient').catch(() => undefined);
    }
    if (err instanceof FetchFailedError) return route.abort(err.code === 'timeout' ? 'timedout' : 'failed').catch(() => undefined);
    // The page or context went away while the request was in flight.
    await route.abort('failed').catch(() => undefined);
  }
}
