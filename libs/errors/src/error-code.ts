/** Every error Runbox reports carries one of these codes; each maps to one HTTP status. */
export enum ErrorCode {
  ValidationFailed = 'validation_failed',
  InvalidJson = 'invalid_json',
  Unauthorized = 'unauthorized',
  Forbidden = 'forbidden',
  NotFound = 'not_found',
  Conflict = 'conflict',
  PayloadTooLarge = 'payload_too_large',
  UnsupportedMediaType = 'unsupported_media_type',
  /** A raw upload without Content-Length: its size must be known before the first byte is stored. */
  LengthRequired = 'length_required',
  /** The session's backend (a saved SSH server, the local backend) does not offer what was asked. */
  UnsupportedBackend = 'unsupported_backend',
  RateLimited = 'rate_limited',
  QuotaExceeded = 'quota_exceeded',
  Unavailable = 'service_unavailable',
  ExecutorUnavailable = 'executor_unavailable',
  /** The session's executor was lost past its grace (or decommissioned) and took the workspace with it. */
  ExecutorLost = 'executor_lost',
  SandboxFailed = 'sandbox_failed',
  Internal = 'internal_error',
}

export const HTTP_STATUS: Record<ErrorCode, number> = {
  [ErrorCode.ValidationFailed]: 400,
  [ErrorCode.InvalidJson]: 400,
  [ErrorCode.Unauthorized]: 401,
  [ErrorCode.Forbidden]: 403,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.PayloadTooLarge]: 413,
  [ErrorCode.UnsupportedMediaType]: 415,
  [ErrorCode.LengthRequired]: 411,
  [ErrorCode.UnsupportedBackend]: 409,
  [ErrorCode.RateLimited]: 429,
  [ErrorCode.QuotaExceeded]: 429,
  [ErrorCode.Unavailable]: 503,
  [ErrorCode.ExecutorUnavailable]: 503,
  [ErrorCode.ExecutorLost]: 410,
  [ErrorCode.SandboxFailed]: 502,
  [ErrorCode.Internal]: 500,
};
