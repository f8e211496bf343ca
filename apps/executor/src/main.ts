import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { keepServingOnStrayErrors, LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { ExecutorModule } from './executor.module';

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(ExecutorModule.forRoot(), { logger: ['error', 'warn'] });
  keepServingOnStrayErrors(app.get<Logger>(LOGGER));
  app.enableShutdownHooks();
}

main().catch((err: unknown) => {
  process.stderr.write(`executor failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
