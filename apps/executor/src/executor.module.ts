import { Inject, Module, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ConfigModule, configSecrets, RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { createLogger, LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { PrismaService } from '@app/persistence';
import Docker from 'dockerode';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { DockerSandboxDriver } from './sandbox/docker-sandbox.driver';
import { sandboxPolicyFrom } from './sandbox/sandbox-policy';
import { SandboxRepository } from './sandbox/sandbox.repository';
import { SandboxService } from './sandbox/sandbox.service';
import { SessionReleaseHandler } from './tools/session-release.handler';
import { ToolCallHandler } from './tools/tool-call.handler';

const EXECUTOR_ID = Symbol('EXECUTOR_ID');

@Module({
  providers: [
    {
      provide: EXECUTOR_ID,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) => c.RUNBOX_EXECUTOR_ID ?? `exec-${hostname().toLowerCase().replace(/[^a-z0-9-]/g, '-')}`,
    },
    {
      provide: LOGGER,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) =>
        createLogger({ service: 'executor', level: c.RUNBOX_LOG_LEVEL, file: c.RUNBOX_LOG_FILE, secrets: configSecrets(c) }),
    },
    {
      provide: PrismaService,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) => PrismaService.forService({ url: c.DATABASE_URL, systemUrl: c.SYSTEM_DATABASE_URL }),
    },
    {
      provide: NATS_CLIENT,
      inject: [RUNBOX_CONFIG, LOGGER, EXECUTOR_ID],
      useFactory: (c: RunboxConfig, logger: Logger, id: string) => NatsClient.connect(c.NATS_URL, `runbox-executor-${id}`, logger),
    },
    { provide: Docker, useFactory: () => new Docker() },
    {
      provide: DockerSandboxDriver,
      inject: [Docker, EXECUTOR_ID, RUNBOX_CONFIG],
      useFactory: (docker: Docker, id: string, c: RunboxConfig) => new DockerSandboxDriver(docker, id, sandboxPolicyFrom(c)),
    },
    { provide: SandboxRepository, inject: [PrismaService], useFactory: (db: PrismaService) => new SandboxRepository(db) },
    {
      provide: SandboxService,
      inject: [EXECUTOR_ID, DockerSandboxDriver, SandboxRepository, LOGGER],
      useFactory: (id: string, d: DockerSandboxDriver, r: SandboxRepository, l: Logger) => new SandboxService(id, d, r, l),
    },
    {
      provide: ToolCallHandler,
      inject: [NATS_CLIENT, SandboxService, LOGGER],
      useFactory: (n: NatsClient, s: SandboxService, l: Logger) => new ToolCallHandler(n, s, l),
    },
    {
      provide: SessionReleaseHandler,
      inject: [NATS_CLIENT, SandboxService, DockerSandboxDriver],
      useFactory: (n: NatsClient, s: SandboxService, d: DockerSandboxDriver) => new SessionReleaseHandler(n, s, d),
    },
  ],
})
class ExecutorCoreModule implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly tools: ToolCallHandler,
    private readonly sessions: SessionReleaseHandler,
    private readonly sandboxes: SandboxService,
    private readonly db: PrismaService,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.tools.listen();
    this.sessions.listen();
    this.logger.info({ executorId: this.sandboxes.executorId }, 'executor listening');
  }

  async onApplicationShutdown(): Promise<void> {
    // Containers stay: sessions keep their shell state and jobs across an executor restart.
    await this.sandboxes.closeAll();
    await this.nats.close();
    await this.db.close();
  }
}

@Module({})
export class ExecutorModule {
  static forRoot(config?: RunboxConfig) {
    return { module: ExecutorModule, imports: [ConfigModule.forRoot(config), ExecutorCoreModule] };
  }
}
