import { ErrorCode } from './error-code';

/** An error whose message is safe to show to the client. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Seconds, for 429 and 503 answers. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }

  static notFound(what: string, id: string): AppError {
    return new AppError(ErrorCode.NotFound, `${what} ${id} not found`);
  }

  static validation(message: string, details?: Record<string, unknown>): AppError {
    return new AppError(ErrorCode.ValidationFailed, message, details);
  }
}
