import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import { AppError, ErrorCode, HTTP_STATUS } from '@app/errors';
import type { Response } from 'express';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ZodError } from 'zod';
import { fromZodError } from '@app/errors';
import { redactSecrets } from '@app/logging';
import { isNatsUnavailable } from '@app/messaging';
import { isDatabaseUnavailable } from '@app/persistence';

/** Retry-After on a 503 while Postgres or NATS is away: a restart takes seconds. */
const UNAVAILABLE_RETRY_SECONDS = 5;

interface BodyParserError {
  type?: string;
  status?: number;
}

/**
 * The one translation from errors to HTTP answers: `{error: {code, message, details?}}`.
 * Known errors keep their status; anything unexpected becomes a 500 with an error id that is
 * logged with the cause, and the client never sees a stack trace.
 */
@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  constructor(
    private readonly logger: Logger,
    /** Values no error body may carry, whatever a message happened to include. */
    private readonly secrets: readonly string[] = [],
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    this.reply(exception, host.switchToHttp().getResponse<Response>());
  }

  reply(exception: unknown, res: Response): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    const error = this.toAppError(exception);
    const status = HTTP_STATUS[error.code];
    const body: Record<string, unknown> = { code: error.code, message: redactSecrets(error.message, this.secrets) };
    if (error.details) body.details = JSON.parse(redactSecrets(JSON.stringify(error.details), this.secrets));
    if (error.retryAfter !== undefined) res.setHeader('Retry-After', String(error.retryAfter));
    res.status(status).json({ error: body });
  }

  private toAppError(exception: unknown): AppError {
    if (exception instanceof AppError) return exception;
    if (exception instanceof ZodError) return fromZodError(exception, 'body');
    const parserError = exception as BodyParserError;
    if (parserError?.type === 'entity.parse.failed') return new AppError(ErrorCode.InvalidJson, 'the request body is not valid JSON');
    if (parserError?.type === 'entity.too.large') return new AppError(ErrorCode.PayloadTooLarge, 'the request body is too large');
    if (parserError?.type === 'encoding.unsupported' || parserError?.type === 'charset.unsupported') {
      return AppError.validation('unsupported body encoding');
    }
    if (parserError?.type === 'request.aborted') return AppError.validation('the request body was cut short');
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      if (status === 404) return new AppError(ErrorCode.NotFound, 'no such route');
      if (status === 413) return new AppError(ErrorCode.PayloadTooLarge, 'the request body is too large');
      if (status < 500) return AppError.validation(exception.message);
    }
    // Postgres restarting, or NATS between servers: the request may be repeated shortly.
    if (isDatabaseUnavailable(exception)) return new AppError(ErrorCode.Unavailable, 'the database is unavailable; try again shortly', undefined, UNAVAILABLE_RETRY_SECONDS);
    if (isNatsUnavailable(exception)) return new AppError(ErrorCode.Unavailable, 'the message bus is unavailable; try again shortly', undefined, UNAVAILABLE_RETRY_SECONDS);
    // Anything else the body parser or router rejected with a 4xx (http-errors objects).
    const status = parserError?.status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      if (status === 413) return new AppError(ErrorCode.PayloadTooLarge, 'the request body is too large');
      if (status === 415) return new AppError(ErrorCode.UnsupportedMediaType, 'the request body must be JSON');
      return AppError.validation('the request could not be read');
    }
    const errorId = randomUUID();
    this.logger.error({ errorId, err: exception }, 'unhandled error');
    return new AppError(ErrorCode.Internal, `internal error (error id ${errorId})`, { error_id: errorId });
  }
}
