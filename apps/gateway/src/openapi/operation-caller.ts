import { Injectable } from '@nestjs/common';
import { EgressRefusedError, FetchFailedError, GuardedResponse } from '@app/egress';
import { GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { Outbound } from '../web/outbound';
import { OpenApiOperation } from './openapi-document';
import { OpenApiAuth } from './openapi-services.schemas';
import { OperationArgumentError, operationRequest, OperationRequest } from './operation-tool';

/** Bytes of a response read; the rest is not downloaded (the output budget cuts the text further). */
export const OPERATION_MAX_RESPONSE_BYTES = 1024 * 1024;
/** Redirects followed, each within the service's server and checked by the egress guard again. */
const MAX_REDIRECTS = 5;
/** Of a failed response's body, this much is shown. */
const ERROR_BODY_BYTES = 2048;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * Calls one operation of a service: only at the service's server (the base URL its document
 * names, checked by the egress guard with the tenant's rules at every hop), with the
 * credential added, bounded in time and size. The answer is the status and the body (JSON
 * pretty-printed); an HTTP error is a failed call with up to 2 KB of its body.
 */
@Injectable()
export class OperationCaller {
  constructor(private readonly outbound: Outbound) {}

  async call(ctx: GatewayToolContext, baseUrl: string, op: OpenApiOperation, args: Record<string, unknown>, auth: OpenApiAuth | undefined): Promise<GatewayToolResult> {
    let request: OperationRequest;
    try {
      request = withAuth(operationRequest(baseUrl, op, args), auth);
    } catch (err) {
      if (err instanceof OperationArgumentError) return toolFailure(`Invalid arguments for ${op.operationId}: ${err.message}`);
      throw err;
    }
    const shown = withoutQueryCredential(request.url, auth);
    const meta: Record<string, unknown> = { method: request.method, url: shown };
    const deadline = Date.now() + ctx.timeoutMs;
    let res: GuardedResponse;
    try {
      for (let hop = 0; ; hop++) {
        res = await this.outbound.fetch(ctx.tenantId, request.url, {
          method: request.method,
          headers: request.headers,
          body: request.body,
          timeoutMs: Math.max(deadline - Date.now(), 1),
          maxBytes: OPERATION_MAX_RESPONSE_BYTES,
          // Redirects are followed here, so each one can be kept within the service's server.
          maxRedirects: 0,
          signal: ctx.signal,
        });
        const location = res.headers.location;
        if (!REDIRECTS.has(res.status) || !location) break;
        const next = parseUrl(location, request.url);
        if (!next || !withinServer(next, baseUrl)) {
          return toolFailure(`${op.operationId} answered HTTP ${res.status}, redirecting outside the service's server (${baseUrl}); not followed.`, { ...meta, status: res.status });
        }
        if (hop + 1 > MAX_REDIRECTS) return toolFailure(`${op.operationId} redirected more than ${MAX_REDIRECTS} times; stopped.`, { ...meta, status: res.status });
        request = { ...request, url: next.toString() };
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && request.method === 'POST')) {
          const { 'content-type': _contentType, ...headers } = request.headers;
          request = { ...request, method: 'GET', headers, body: undefined };
        }
      }
    } catch (err) {
      if (err instanceof EgressRefusedError) return toolFailure(`Refused to call ${op.operationId} at ${shown}: ${err.message}`, { ...meta, error_code: err.code });
      if (err instanceof FetchFailedError) return toolFailure(`Could not call ${op.operationId} at ${shown}: ${err.message}`, { ...meta, error_code: err.code });
      throw err;
    }
    const type = String(res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    const resultMeta = { ...meta, status: res.status, content_type: type, bytes: res.body.length, ...(res.truncated ? { download_truncated: true } : {}) };
    if (res.status >= 400) {
      const body = res.body.subarray(0, ERROR_BODY_BYTES).toString('utf8');
      return toolFailure(`HTTP ${res.status} from ${op.operationId}\n\n${body}${res.body.length > ERROR_BODY_BYTES ? '\n… (body cut at 2 KB)' : ''}`, resultMeta);
    }
    let text = bodyText(res, type);
    if (res.truncated) text += `\n… the response was cut at ${OPERATION_MAX_RESPONSE_BYTES} bytes`;
    return toolOutput(`HTTP ${res.status}\n\n${text}`, resultMeta);
  }
}

function withAuth(request: OperationRequest, auth: OpenApiAuth | undefined): OperationRequest {
  if (!auth) return request;
  if (auth.type === 'bearer') return { ...request, headers: { ...request.headers, authorization: `Bearer ${auth.token}` } };
  if (auth.type === 'header') return { ...request, headers: { ...request.headers, [auth.name.toLowerCase()]: auth.value } };
  const url = new URL(request.url);
  url.searchParams.set(auth.name, auth.value);
  return { ...request, url: url.toString() };
}

/** The URL as shown to the model and stored in results: a credential in the query is not. */
function withoutQueryCredential(url: string, auth: OpenApiAuth | undefined): string {
  if (auth?.type !== 'query') return url;
  const shown = new URL(url);
  shown.searchParams.delete(auth.name);
  return shown.toString();
}

function parseUrl(location: string, base: string): URL | undefined {
  try {
    return new URL(location, base);
  } catch {
    return undefined;
  }
}

/** Same origin as the server, and under its base path. */
export function withinServer(url: URL, baseUrl: string): boolean {
  const base = new URL(baseUrl);
  if (url.origin !== base.origin) return false;
  const prefix = base.pathname.replace(/\/+$/, '');
  return prefix === '' || url.pathname === prefix || url.pathname.startsWith(`${prefix}/`);
}

function bodyText(res: GuardedResponse, type: string): string {
  if (res.body.length === 0) return '(empty body)';
  const text = res.body.toString('utf8');
  if (type.endsWith('json') || type.endsWith('+json')) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      return text;
    }
  }
  if (type === '' || type.startsWith('text/') || type.endsWith('xml') || type === 'application/x-www-form-urlencoded') return text;
  return `(${res.body.length} bytes of ${type}, not shown as text)`;
}
