import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';

/**
 * Keeps a service serving through a stray promise rejection or exception.
 *
 * Node's default ends the process on either, and a service shared by many tenants must not
 * end because of what one of them sent or printed. Each is logged with an error id (the id
 * an operator greps for); the handlers that caused them answer their callers on their own.
 * Installed once per process by main.ts; returns a function that removes the handlers.
 */
export function keepServingOnStrayErrors(logger: Logger): () => void {
  const onRejection = (reason: unknown) => {
    logger.error({ err: reason, errorId: randomUUID() }, 'unhandled promise rejection; the process keeps serving');
  };
  const onException = (err: Error) => {
    logger.error({ err, errorId: randomUUID() }, 'uncaught exception; the process keeps serving');
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
