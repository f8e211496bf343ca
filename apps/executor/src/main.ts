import 'reflect-metadata';
import { keepServingOnStrayErrors, LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { startExecutor } from './executor.app';

async function main(): Promise<void> {
  const app = await startExecutor();
  keepServingOnStrayErrors(app.get<Logger>(LOGGER));
  app.enableShutdownHooks();
}

main().catch((err: unknown) => {
  process.stderr.write(`executor failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
