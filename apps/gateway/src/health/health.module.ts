import { Module } from '@nestjs/common';
import { ToolsModule } from '../tools/tools.module';
import { HealthController } from './health.controller';

/** /healthz and /readyz (readiness asks an executor too). */
@Module({
  imports: [ToolsModule],
  controllers: [HealthController],
})
export class HealthModule {}
