import { BeforeApplicationShutdown, Inject, Module, OnApplicationBootstrap, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ConfigModule, configSecrets, databasePoolSizes, RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { createLogger, LOGGER } from '@app/logging';
import { ContractExceptionFilter, NATS_CLIENT, NatsClient } from '@app/messaging';
import { PrismaService } from '@app/persistence';
import Docker from 'dockerode';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { McpStdioController } from './mcp-stdio/mcp-stdio.controller';
import { McpStdioHandler } from './mcp-stdio/mcp-stdio.handler';
import { DockerSandboxDriver } from './sandbox/docker-sandbox.driver';
import { workspaceVolumesOn } from './sandbox/docker-workspace-disks';
import { sandboxPolicyFrom } from './sandbox/sandbox-policy';
import { SandboxRepository } from './sandbox/sandbox.repository';
import { DockerRuntime } from './sandbox/docker-runtime';
import { LocalRuntime } from './sandbox/local/local-runtime';
import { reapIntervalFor, SandboxJanitor } from './sandbox/sandbox-janitor';
import { SandboxPool } from './sandbox/sandbox-pool';
import { SandboxBackend, SandboxRuntime } from './sandbox/sandbox-runtime';
import { SandboxService } from './sandbox/sandbox.service';
import { warmPoolSizingFrom } from './sandbox/warm-pool-demand';
import { createVpsTransferHandler } from './ssh/vps-transfer.providers';
import { VpsTransferHandler } from './ssh/vps-transfer.handler';
import { ExecutorHttpServer } from './observability/executor-http.server';
import { observabilityProviders } from './observability/observability.providers';
import { ExecutorPingController } from './tools/executor-ping.controller';
import { ExecutorPingHandler } from './tools/executor-ping.handler';
import { SessionReleaseController } from './tools/session-release.controller';
import { SessionReleaseHandler } from './tools/session-release.handler';
import { ToolCallController } from './tools/tool-call.controller';
import { ToolCallHandler } from './tools/tool-call.handler';
import { ExecutorAnnouncer } from './registration/executor-announcer';
import { ExecutorRegistrationController } from './registration/executor-registration.controller';
import { runboxVersion } from './registration/executor-version';
import { ContainerArchives } from './workspace-files/container-archives';
import { WorkspaceFilesController } from './workspace-files/workspace-files.controller';
import { WorkspaceFilesHandler } from './workspace-files/workspace-files.handler';

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
      useFactory: (c: RunboxConfig) => PrismaService.forService({ url: c.DATABASE_URL, systemUrl: c.SYSTEM_DATABASE_URL }, databasePoolSizes(c, 'executor')),
    },
    {
      provide: NATS_CLIENT,
      inject: [RUNBOX_CONFIG, LOGGER, EXECUTOR_ID],
      useFactory: (c: RunboxConfig, logger: Logger, id: string) => NatsClient.connect(c.NATS_URL, `runbox-executor-${id}`, logger),
    },
    ...observabilityProviders(EXECUTOR_ID),
    {
      provide: DockerSandboxDriver,
      inject: [Docker, EXECUTOR_ID, RUNBOX_CONFIG, LOGGER],
      useFactory: (docker: Docker, id: string, c: RunboxConfig, l: Logger) => {
        const workspaces = workspaceVolumesOn(docker, { image: c.RUNBOX_SANDBOX_IMAGE, executorId: id, sizeMb: c.RUNBOX_SANDBOX_DISK_MB }, l);
        return new DockerSandboxDriver(docker, id, sandboxPolicyFrom(c), workspaces);
      },
    },
    { provide: SandboxRepository, inject: [PrismaService], useFactory: (db: PrismaService) => new SandboxRepository(db) },
    {
      provide: SandboxPool,
      inject: [RUNBOX_CONFIG, DockerSandboxDriver, LOGGER],
      useFactory: (c: RunboxConfig, d: DockerSandboxDriver, l: Logger) => new SandboxPool(warmPoolSizingFrom(c), d, l),
    },
    {
      provide: SandboxService,
      inject: [RUNBOX_CONFIG, EXECUTOR_ID, DockerSandboxDriver, SandboxPool, SandboxRepository, LOGGER],
      useFactory: (c: RunboxConfig, id: string, d: DockerSandboxDriver, pool: SandboxPool, r: SandboxRepository, l: Logger) => {
        const runtimes = new Map<SandboxBackend, SandboxRuntime>([['docker', new DockerRuntime(d, pool, l)]]);
        // The local backend exists only when the operator asked for it by name.
        if (c.RUNBOX_UNSAFE_LOCAL_BACKEND) runtimes.set('local', new LocalRuntime(c.RUNBOX_LOCAL_WORKSPACES, id, l));
        const policy = { idleTtlMs: c.RUNBOX_SANDBOX_IDLE_TTL_SECONDS * 1000, keepWorkspaceOnIdle: c.RUNBOX_SANDBOX_KEEP_VOLUME_ON_IDLE };
        return new SandboxService(id, runtimes, r, policy, l, Date.now, c.RUNBOX_EXECUTOR_MAX_SANDBOXES);
      },
    },
    {
      provide: SandboxJanitor,
      inject: [RUNBOX_CONFIG, SandboxService, LOGGER],
      useFactory: (c: RunboxConfig, s: SandboxService, l: Logger) =>
        new SandboxJanitor(
          s,
          { reapEveryMs: reapIntervalFor(c.RUNBOX_SANDBOX_IDLE_TTL_SECONDS * 1000), sweepEveryMs: c.RUNBOX_SANDBOX_SWEEP_SECONDS * 1000 },
          l,
        ),
    },
    {
      provide: VpsTransferHandler,
      inject: [RUNBOX_CONFIG, PrismaService, Docker, SandboxService, LOGGER],
      useFactory: createVpsTransferHandler,
    },
    {
      provide: ToolCallHandler,
      inject: [NATS_CLIENT, SandboxService, LOGGER, VpsTransferHandler],
      useFactory: (n: NatsClient, s: SandboxService, l: Logger, t: VpsTransferHandler) => new ToolCallHandler(n, s, l, t),
    },
    {
      provide: McpStdioHandler,
      inject: [RUNBOX_CONFIG, SandboxService, LOGGER],
      useFactory: (c: RunboxConfig, s: SandboxService, l: Logger) =>
        new McpStdioHandler(s, { maxProcesses: c.RUNBOX_MCP_STDIO_MAX_PROCESSES, idleSeconds: c.RUNBOX_MCP_STDIO_IDLE_SECONDS }, l),
    },
    {
      provide: WorkspaceFilesHandler,
      inject: [Docker, NATS_CLIENT, SandboxService, LOGGER],
      useFactory: (docker: Docker, n: NatsClient, s: SandboxService, l: Logger) => new WorkspaceFilesHandler(s, new ContainerArchives(docker), n.connection, l),
    },
    {
      provide: SessionReleaseHandler,
      inject: [SandboxService],
      useFactory: (s: SandboxService) => new SessionReleaseHandler(s),
    },
    {
      provide: ExecutorPingHandler,
      inject: [SandboxService, DockerSandboxDriver],
      useFactory: (s: SandboxService, d: DockerSandboxDriver) => new ExecutorPingHandler(s, d),
    },
    {
      provide: ExecutorAnnouncer,
      inject: [RUNBOX_CONFIG, NATS_CLIENT, SandboxService, SandboxPool, LOGGER],
      useFactory: (c: RunboxConfig, n: NatsClient, s: SandboxService, pool: SandboxPool, l: Logger) =>
        new ExecutorAnnouncer(n, { sandboxes: s, warmPool: () => pool.ready }, Math.round(c.RUNBOX_EXECUTOR_HEARTBEAT_SECONDS * 1000), runboxVersion(), l),
    },
    ContractExceptionFilter,
  ],
  // One controller per subject group; NatsContractServer (executor.app.ts) subscribes their patterns.
  controllers: [ToolCallController, SessionReleaseController, ExecutorPingController, McpStdioController, WorkspaceFilesController, ExecutorRegistrationController],
})
class ExecutorCoreModule implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly janitor: SandboxJanitor,
    private readonly db: PrismaService,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    private readonly http: ExecutorHttpServer,
    private readonly announcer: ExecutorAnnouncer,
    private readonly toolCalls: ToolCallHandler,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Probes answer from here on: live at once, ready once subscribed (executor.app.ts). */
  async onModuleInit(): Promise<void> {
    await this.http.listen();
  }

  async onApplicationBootstrap(): Promise<void> {
    // Take back the previous process's sandboxes before the first sweep, so it keeps them.
    await this.sandboxes.recover();
    await this.janitor.sweepNow();
    this.sandboxes.start();
    this.janitor.start();
    // The controllers start answering once the app listens (executor.app.ts), after this.
  }

  /**
   * A stop (SIGTERM, a rolling restart) drains: no new session from now on, said at once
   * to every gateway; no new call is taken (callers find no responder and answer 503 with
   * Retry-After); the calls already taken finish, each bounded by its own time limit.
   * The sandboxes stay for the process that comes back under the same id.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.sandboxes.stopAdmitting('draining');
    this.announcer.announce();
    await this.nats.stopResponding();
    const inFlight = this.toolCalls.inFlight.count;
    if (inFlight > 0) this.logger.info({ inFlight }, 'draining: waiting for the calls in flight');
    await this.toolCalls.inFlight.settled();
    this.announcer.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    this.announcer.stop();
    await this.http.close();
    await this.janitor.stop();
    // Session containers stay: their shell state and jobs survive an executor restart.
    // Waiting pool containers are removed (they hold nothing).
    await this.sandboxes.shutdown();
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
