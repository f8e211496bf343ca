import { INestMicroservice, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RunboxConfig } from '@app/config';
import { EXECUTOR_QUEUE_GROUP } from '@app/contracts';
import { LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient, NatsContractServer } from '@app/messaging';
import type { Logger } from 'pino';
import { ExecutorModule } from './executor.module';
import { ExecutorHttpServer } from './observability/executor-http.server';
import { ExecutorAnnouncer } from './registration/executor-announcer';
import { SandboxService } from './sandbox/sandbox.service';

/**
 * Builds and starts the executor, as production and the tests run it. It resolves once the
 * executor is ready, and ready means subscribed: its sandboxes are recovered (the module's
 * bootstrap), then the transport subscribes every controller's subjects and waits for the
 * server to confirm them, so no call made after this finds "no responders".
 */
export async function startExecutor(config?: RunboxConfig, logger: LoggerService | LogLevel[] | false = ['error', 'warn']): Promise<INestMicroservice> {
  const transport = new NatsContractServer();
  const app = await NestFactory.createMicroservice(ExecutorModule.forRoot(config), { strategy: transport, logger });
  await app.init();
  const executorId = app.get(SandboxService).executorId;
  transport.attach({ nats: app.get<NatsClient>(NATS_CLIENT), responderId: executorId, queue: EXECUTOR_QUEUE_GROUP });
  const announcer = app.get(ExecutorAnnouncer);
  // Answering presence probes before subscribing to anything else: a gateway that asks
  // about a call this process took always finds it (ExecutorClient.goneDuring).
  announcer.answerPresence();
  await app.listen();
  app.get(ExecutorHttpServer).markSubscribed();
  // Announced only once subscribed: a gateway that places a session here finds it answering.
  announcer.start();
  app.get<Logger>(LOGGER).info({ executorId }, 'executor listening');
  return app;
}
