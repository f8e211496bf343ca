import { ArgumentsHost, Catch, Inject, Injectable, RpcExceptionFilter } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { rpcErrorSchema } from '@app/contracts';
import { AppError } from '@app/errors';
import { LOGGER } from '@app/logging';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Observable, of } from 'rxjs';
import { ContractContext } from './contract-context';

/**
 * Turns what a request handler threw into the contract's error reply, so the caller reads
 * an error it can act on: an AppError keeps its code and message, an RpcException carrying
 * `{code, message}` (a rejected request) likewise; anything else is a bug, answered as
 * `internal_error` with an error id that is logged with the error and nothing more.
 */
@Catch()
@Injectable()
export class ContractExceptionFilter implements RpcExceptionFilter<unknown> {
  constructor(@Inject(LOGGER) private readonly logger: Logger) {}

  catch(exception: unknown, host: ArgumentsHost): Observable<unknown> {
    const context = host.switchToRpc().getContext<ContractContext>();
    if (exception instanceof AppError) return of(context.errorReply({ code: exception.code, message: exception.message }));
    if (exception instanceof RpcException) {
      const error = rpcErrorSchema.safeParse(exception.getError());
      if (error.success) return of(context.errorReply(error.data));
    }
    const errorId = randomUUID();
    this.logger.error({ subject: context.subject, err: exception, errorId }, 'handler failed');
    return of(context.errorReply({ code: 'internal_error', message: `the handler failed (error id ${errorId})` }));
  }
}
