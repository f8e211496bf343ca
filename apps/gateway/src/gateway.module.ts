import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { ConfigModule, configSecrets, databasePoolSizes, RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { createLogger, LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { PrismaService } from '@app/persistence';
import type { Logger } from 'pino';
import { AdminModule } from './admin/admin.module';
import { ApiDocsModule } from './api-docs/api-docs.module';
import { ConsoleModule } from './console/console.module';
import { DelegationModule } from './delegation/delegation.module';
import { FilesModule } from './files/files.module';
import { HealthModule } from './health/health.module';
import { HistoryModule } from './history/history.module';
import { McpModule } from './mcp/mcp.module';
import { MemoryModule } from './memory/memory.module';
import { MetricsModule } from './metrics/metrics.module';
import { OpenApiModule } from './openapi/openapi.module';
import { RetrievalModule } from './rag/retrieval.module';
import { RunControlService } from './runs/run-control.service';
import { RunsModule } from './runs/runs.module';
import { ServersModule } from './servers/servers.module';
import { SshSessionBackends } from './servers/ssh-session-backends';
import { SessionRunsCanceller } from './sessions/session-runs-canceller';
import { SessionsModule } from './sessions/sessions.module';
import { SkillsModule } from './skills/skills.module';
import { TenancyModule } from './tenants/tenancy.module';
import { TodosModule } from './todos/todos.module';
import { SESSION_TOOL_ROUTER } from './tools/session-tool-router';
import { ToolsModule } from './tools/tools.module';
import { WebModule } from './web/web.module';

/** Connections every feature shares: the database, NATS and the logger. */
@Global()
@Module({
  providers: [
    {
      provide: LOGGER,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) =>
        createLogger({ service: 'gateway', level: c.RUNBOX_LOG_LEVEL, file: c.RUNBOX_LOG_FILE, secrets: configSecrets(c) }),
    },
    {
      provide: PrismaService,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) => PrismaService.forService({ url: c.DATABASE_URL, systemUrl: c.SYSTEM_DATABASE_URL }, databasePoolSizes(c, 'gateway')),
    },
    {
      provide: NATS_CLIENT,
      inject: [RUNBOX_CONFIG, LOGGER],
      useFactory: (c: RunboxConfig, logger: Logger) => NatsClient.connect(c.NATS_URL, 'runbox-gateway', logger),
    },
  ],
  exports: [LOGGER, PrismaService, NATS_CLIENT],
})
class InfrastructureModule implements OnApplicationShutdown {
  constructor(
    private readonly db: PrismaService,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.nats.close();
    await this.db.close();
  }
}

/**
 * Ports a feature declares for a feature that builds on it, bound where both are known.
 * Deleting a session cancels its runs, but runs build on sessions, so SessionsService asks
 * for a SessionRunsCanceller and gets the runs feature's RunControlService. The tool router
 * sends the calls of a session bound to a saved SSH server to that server's backend.
 */
@Global()
@Module({
  imports: [RunsModule, ServersModule],
  providers: [
    { provide: SessionRunsCanceller, useExisting: RunControlService },
    { provide: SESSION_TOOL_ROUTER, useExisting: SshSessionBackends },
  ],
  exports: [SessionRunsCanceller, SESSION_TOOL_ROUTER],
})
class FeatureBindingsModule {}

const FEATURES = [
  TenancyModule,
  AdminModule,
  ToolsModule,
  SessionsModule,
  FilesModule,
  ServersModule,
  WebModule,
  McpModule,
  OpenApiModule,
  RunsModule,
  DelegationModule,
  MemoryModule,
  HistoryModule,
  RetrievalModule,
  TodosModule,
  SkillsModule,
  HealthModule,
  MetricsModule,
  ApiDocsModule,
  ConsoleModule,
];

@Module({})
export class GatewayModule {
  static forRoot(config?: RunboxConfig) {
    return { module: GatewayModule, imports: [ConfigModule.forRoot(config), InfrastructureModule, FeatureBindingsModule, ...FEATURES] };
  }
}
