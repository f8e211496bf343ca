import { Provider } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { dockerOptionsFor } from '../sandbox/docker-host';
import { SandboxPool } from '../sandbox/sandbox-pool';
import { SandboxService } from '../sandbox/sandbox.service';
import { ExecutorHttpServer } from './executor-http.server';
import { timeDockerApi } from './docker-api-timing';
import { ExecutorMetrics } from './executor-metrics';

/**
 * The executor's metrics and its probe/scrape server. `executorId` is the token the
 * executor's id is provided under; the Docker client (for the engine DOCKER_HOST names) is
 * made here so every engine call it makes is timed.
 */
export function observabilityProviders(executorId: symbol): Provider[] {
  return [
    { provide: ExecutorMetrics, inject: [executorId], useFactory: (id: string) => new ExecutorMetrics(id) },
    {
      provide: Docker,
      inject: [RUNBOX_CONFIG, ExecutorMetrics],
      useFactory: (c: RunboxConfig, metrics: ExecutorMetrics) => timeDockerApi(new Docker(dockerOptionsFor(c.DOCKER_HOST)), metrics.observeDockerCall),
    },
    {
      provide: ExecutorHttpServer,
      inject: [RUNBOX_CONFIG, ExecutorMetrics, NATS_CLIENT, Docker, SandboxService, SandboxPool, LOGGER],
      useFactory: (c: RunboxConfig, metrics: ExecutorMetrics, nats: NatsClient, docker: Docker, sandboxes: SandboxService, pool: SandboxPool, logger: Logger) => {
        metrics.watch({
          sandboxes: () => sandboxes.countByState(),
          warmPool: () => ({ ready: pool.ready, target: pool.target }),
          channelErrors: () => sandboxes.channelErrors,
        });
        return new ExecutorHttpServer(
          c.RUNBOX_EXECUTOR_HTTP_PORT,
          metrics,
          [
            { name: 'nats', probe: () => nats.ping() },
            { name: 'docker', probe: () => docker.ping().then(() => true) },
          ],
          logger,
        );
      },
    },
  ];
}
