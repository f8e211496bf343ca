/** Every error the SDK throws is a RunboxError (an aborted call rethrows the signal's reason instead). */
export class RunboxError extends Error {
  override readonly name: string = 'RunboxError';
}

/** The `{error: {code, message, details?}}` body every Runbox error answer carries. */
export interface ApiErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

/**
 * The API answered with an error status. `code` is the API's own error code (`not_found`,
 * `validation_failed`, ...), stable across versions; `status` the HTTP status.
 */
export class ApiError extends RunboxError {
  override readonly name: string = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** The gateway's request id (the `x-request-id` header), to quote when reporting a problem. */
    readonly requestId?: string,
  ) {
    super(message);
  }
}

export class BadRequestError extends ApiError {
  override readonly name = 'BadRequestError';
}
export class AuthenticationError extends ApiError {
  override readonly name = 'AuthenticationError';
}
export class PermissionDeniedError extends ApiError {
  override readonly name = 'PermissionDeniedError';
}
export class NotFoundError extends ApiError {
  override readonly name = 'NotFoundError';
}
export class ConflictError extends ApiError {
  override readonly name = 'ConflictError';
}
export class PayloadTooLargeError extends ApiError {
  override readonly name = 'PayloadTooLargeError';
}
export class RateLimitError extends ApiError {
  override readonly name = 'RateLimitError';
  /** Seconds the server asked to wait (Retry-After), when it said. */
  retryAfterSeconds?: number;
}
export class InternalServerError extends ApiError {
  override readonly name = 'InternalServerError';
}
export class ServiceUnavailableError extends ApiError {
  override readonly name = 'ServiceUnavailableError';
}

/** No answer: the connection was refused, reset, or timed out before a response came. */
export class ConnectionError extends RunboxError {
  override readonly name = 'ConnectionError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Waiting for something (a run to end) took longer than the caller allowed. */
export class TimeoutError extends RunboxError {
  override readonly name = 'TimeoutError';
}

type ApiErrorClass = new (status: number, code: string, message: string, details?: unknown, requestId?: string) => ApiError;

const BY_STATUS: Record<number, ApiErrorClass> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitError,
  503: ServiceUnavailableError,
};

/** The typed error for an error answer; a body that is not Runbox's error shape still gives status and text. */
export function apiErrorFrom(status: number, bodyText: string, requestId?: string): ApiError {
  const parsed = parseErrorBody(bodyText);
  const code = parsed?.code ?? `http_${status}`;
  const message = parsed?.message ?? (bodyText.trim().slice(0, 500) || `HTTP ${status}`);
  const Class = BY_STATUS[status] ?? (status >= 500 ? InternalServerError : ApiError);
  return new Class(status, code, message, parsed?.details, requestId);
}

function parseErrorBody(text: string): ApiErrorBody | undefined {
  try {
    const body: unknown = JSON.parse(text);
    if (!isRecord(body) || !isRecord(body.error)) return undefined;
    const { code, message, details } = body.error;
    if (typeof code !== 'string' || typeof message !== 'string') return undefined;
    return { code, message, details };
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
