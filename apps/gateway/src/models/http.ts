import { redactSecrets } from '@app/logging';
import { ModelError } from './model-provider';

export interface ModelHttpRequest {
  url: string;
  body: unknown;
  headers: Record<string, string>;
  /** For a plain request, the whole exchange; for a stream, the longest silence between chunks. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** POSTs JSON and returns the parsed answer; every failure becomes a ModelError with a readable message. */
export async function postJson(request: ModelHttpRequest): Promise<unknown> {
  const timeout = AbortSignal.timeout(request.timeoutMs);
  const res = await send(request, timeout);
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    throw transportError(err, request, timeout);
  }
  if (!res.ok) throw httpError(res.status, text, sentCredentials(request));
  try {
    return JSON.parse(text);
  } catch {
    throw new ModelError('the model provider answered with something that is not JSON', false);
  }
}

/** One server-sent event as a provider streams it. */
export interface SseEvent {
  event?: string;
  data: string;
}

/**
 * POSTs JSON and yields the server-sent events of the answer. The timeout applies to
 * silence: a long answer that keeps streaming is never cut, a stalled one is.
 */
export async function* postForEvents(request: ModelHttpRequest): AsyncGenerator<SseEvent> {
  const idle = new AbortController();
  let timer = setTimeout(() => idle.abort(), request.timeoutMs);
  const touch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => idle.abort(), request.timeoutMs);
  };
  try {
    const res = await send(request, idle.signal);
    if (!res.ok) throw httpError(res.status, await res.text().catch(() => ''), sentCredentials(request));
    if (!res.body) throw new ModelError('the model provider answered a stream request without a body', true);
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        touch();
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = eventEnd(buffer)) >= 0) {
          const event = parseEvent(buffer.slice(0, end));
          buffer = buffer.slice(end).replace(/^(\r?\n){1,2}/, '');
          if (event) yield event;
        }
      }
    } catch (err) {
      if (err instanceof ModelError) throw err;
      throw transportError(err, request, idle.signal);
    }
    const last = parseEvent(buffer);
    if (last) yield last;
  } finally {
    clearTimeout(timer);
  }
}

function send(request: ModelHttpRequest, timeout: AbortSignal): Promise<Response> {
  const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
  return fetch(request.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...request.headers },
    body: JSON.stringify(request.body),
    signal,
  }).catch((err: unknown) => {
    throw transportError(err, request, timeout);
  });
}

function transportError(err: unknown, request: ModelHttpRequest, timeout: AbortSignal): ModelError {
  if (request.signal?.aborted) return new ModelError('the model call was cancelled', false);
  if (timeout.aborted) return new ModelError(`the model provider did not answer within ${request.timeoutMs} ms`, true);
  return new ModelError(`could not reach the model provider: ${err instanceof Error ? err.message : String(err)}`, true);
}

/** 429 and 5xx (including Anthropic's 529 "overloaded") are worth another try; other statuses are not. */
export function httpError(status: number, body: string, secrets: string[] = []): ModelError {
  // Providers sometimes quote the key they were sent; it must not reach the run's error.
  const snippet = redactSecrets(body, secrets).slice(0, 300).replace(/\s+/g, ' ').trim();
  return new ModelError(`the model provider answered HTTP ${status}${snippet ? `: ${snippet}` : ''}`, status === 429 || status >= 500);
}

function eventEnd(buffer: string): number {
  const lf = buffer.indexOf('\n\n');
  const crlf = buffer.indexOf('\r\n\r\n');
  if (lf < 0) return crlf;
  if (crlf < 0) return lf;
  return Math.min(lf, crlf);
}

function parseEvent(block: string): SseEvent | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    else if (line.startsWith('event:')) event = line.slice(6).trim();
  }
  return data.length > 0 ? { event, data: data.join('\n') } : undefined;
}

/** The credentials a request carries (OpenAI's bearer token, Anthropic's x-api-key). */
function sentCredentials(request: ModelHttpRequest): string[] {
  const bearer = request.headers.authorization?.replace(/^Bearer\s+/i, '');
  return [bearer, request.headers['x-api-key']].filter((v): v is string => !!v);
}
