import { Module } from '@nestjs/common';
import { ModelsModule } from '../models/models.module';
import { SessionsModule } from '../sessions/sessions.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { ToolsModule } from '../tools/tools.module';
import { ActiveRunsGauge } from './active-runs.gauge';
import { RunControlService } from './run-control.service';
import { RunDefaultsRepository } from './run-defaults.repository';
import { RunEnqueuer } from './run-enqueuer';
import { RunEventStream } from './run-event-stream';
import { RunEventsService } from './run-events.service';
import { RunLoop } from './run-loop';
import { RunWorkers } from './run-workers';
import { RunSupervisor } from './run-supervisor';
import { RunToolSelection } from './run-tools';
import { RunsController } from './runs.controller';
import { RunEventsRepository } from './run-events.repository';
import { RunLeasesRepository } from './run-leases.repository';
import { RunMessagesRepository } from './run-messages.repository';
import { RunSweepsRepository } from './run-sweeps.repository';
import { RunsRepository } from './runs.repository';
import { RunsService } from './runs.service';
import { ToolCallRunner } from './tool-call-runner';
import { SubRunsRepository } from './sub-runs.repository';
import { ToolCallsRepository } from './tool-calls.repository';

/**
 * Runs: the /v1/runs API, the JetStream queue and its workers, the agent loop, tool calls
 * with their approvals, and the sweep that repairs stranded runs.
 */
@Module({
  imports: [TenancyModule, SessionsModule, ToolsModule, ModelsModule],
  controllers: [RunsController],
  providers: [
    RunsRepository,
    RunDefaultsRepository,
    SubRunsRepository,
    RunLeasesRepository,
    RunEventsRepository,
    RunMessagesRepository,
    RunSweepsRepository,
    ToolCallsRepository,
    RunEventsService,
    RunEventStream,
    RunEnqueuer,
    RunControlService,
    RunToolSelection,
    ToolCallRunner,
    RunLoop,
    RunWorkers,
    RunsService,
    RunSupervisor,
    ActiveRunsGauge,
  ],
  exports: [RunsRepository, SubRunsRepository, ToolCallsRepository, RunEventsService, RunControlService, RunToolSelection, RunWorkers],
})
export class RunsModule {}
