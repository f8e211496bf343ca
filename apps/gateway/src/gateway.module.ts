import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { ConfigModule, configSecrets, RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { createLogger, LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { PrismaService } from '@app/persistence';
import type { Logger } from 'pino';
import { AdminGuard } from './auth/admin.guard';
import { DelegateTaskTool } from './delegation/delegate-task.tool';
import { SubRuns } from './delegation/sub-runs';
import { ApiKeyGuard } from './auth/api-key.guard';
import { AuthService } from './auth/auth.service';
import { HealthController } from './health/health.controller';
import { MetricsController } from './metrics/metrics.controller';
import { MetricsService } from './metrics/metrics.service';
import { ModelsModule } from './models/models.module';
import { RunControlService } from './runs/run-control.service';
import { RunDispatcher } from './runs/run-dispatcher';
import { QuotasRepository } from './quotas/quotas.repository';
import { QuotasService } from './quotas/quotas.service';
import { RunEventStream } from './runs/run-event-stream';
import { RunEventsService } from './runs/run-events.service';
import { RunLoop } from './runs/run-loop';
import { RunQueue } from './runs/run-queue';
import { RunSupervisor } from './runs/run-supervisor';
import { RunToolSelection } from './runs/run-tools';
import { RunsController } from './runs/runs.controller';
import { RunsRepository } from './runs/runs.repository';
import { RunsService } from './runs/runs.service';
import { ToolCallRunner } from './runs/tool-call-runner';
import { ToolCallsRepository } from './runs/tool-calls.repository';
import { SessionsController } from './sessions/sessions.controller';
import { SessionsRepository } from './sessions/sessions.repository';
import { SessionsService } from './sessions/sessions.service';
import { AdminController } from './tenants/admin.controller';
import { TenantsRepository } from './tenants/tenants.repository';
import { TenantsService } from './tenants/tenants.service';
import { ExecutorClient } from './tools/executor.client';
import { GATEWAY_TOOL_CONTROLLERS, GATEWAY_TOOL_PROVIDERS } from './tools/gateway-tools.providers';
import { ToolDispatcher } from './tools/tool-dispatcher';
import { ToolRegistry } from './tools/tool-registry';
import { ToolsController } from './tools/tools.controller';

/** Connections every feature shares: the database, NATS and the logger. */
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
      useFactory: (c: RunboxConfig) => PrismaService.forService({ url: c.DATABASE_URL, systemUrl: c.SYSTEM_DATABASE_URL }),
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

@Module({
  imports: [InfrastructureModule, ModelsModule],
  controllers: [AdminController, SessionsController, RunsController, ToolsController, HealthController, MetricsController, ...GATEWAY_TOOL_CONTROLLERS],
  providers: [
    MetricsService,
    AuthService,
    ApiKeyGuard,
    AdminGuard,
    TenantsRepository,
    TenantsService,
    SessionsRepository,
    SessionsService,
    ToolRegistry,
    ToolDispatcher,
    ExecutorClient,
    RunsRepository,
    RunEventsService,
    RunEventStream,
    RunLoop,
    RunQueue,
    RunsService,
    ToolCallsRepository,
    ToolCallRunner,
    RunDispatcher,
    RunControlService,
    RunSupervisor,
    QuotasRepository,
    QuotasService,
    ...GATEWAY_TOOL_PROVIDERS,
    RunToolSelection,
    SubRuns,
    DelegateTaskTool,
  ],
})
class GatewayFeaturesModule {}

@Module({})
export class GatewayModule {
  static forRoot(config?: RunboxConfig) {
    return { module: GatewayModule, imports: [ConfigModule.forRoot(config), GatewayFeaturesModule] };
  }
}
