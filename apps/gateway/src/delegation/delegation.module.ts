import { Module } from '@nestjs/common';
import { RunsModule } from '../runs/runs.module';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { ToolsModule } from '../tools/tools.module';
import { DelegateTaskTool } from './delegate-task.tool';
import { SubRuns } from './sub-runs';

/** delegate_task: sub-runs with a fresh context, driven in the worker of the run that asked. */
@Module({
  imports: [RunsModule, ToolsModule],
  providers: [SubRuns, ...gatewayToolProviders(DelegateTaskTool)],
})
export class DelegationModule {}
