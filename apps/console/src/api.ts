/** The gateway's HTTP API, called on the console's own origin with a bearer token. */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

/** Sends one request; an error answer becomes an ApiError carrying the API's code and message. */
export async function request<T>(token: string, path: string, options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method: options.method ?? 'GET',
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
    cache: 'no-store',
  });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  const parsed = parseJson(text);
  if (!res.ok) {
    const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(res.status, error?.code ?? 'http_error', error?.message ?? `${res.status} ${res.statusText}`);
  }
  return parsed as T;
}

/** Fetches raw bytes (the files API), keeping the content type. */
export async function requestBlob(token: string, path: string, signal?: AbortSignal): Promise<Blob> {
  const res = await fetch(path, { headers: { authorization: `Bearer ${token}` }, signal, cache: 'no-store' });
  if (!res.ok) {
    const error = (parseJson(await res.text()) as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(res.status, error?.code ?? 'http_error', error?.message ?? `${res.status} ${res.statusText}`);
  }
  return res.blob();
}

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

/** A path segment or query value, escaped. */
export const seg = encodeURIComponent;
