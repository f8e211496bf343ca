import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { ExecutorModule } from './executor.module';

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(ExecutorModule.forRoot(), { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
}

main().catch((err: unknown) => {
  process.stderr.write(`executor failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
