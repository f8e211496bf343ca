import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { SkillTool } from './skill.tool';
import { SkillsController } from './skills.controller';
import { SkillsRepository } from './skills.repository';

/** Skills: built-in and tenant-written instructions the skill tool lists, reads and writes, and /v1/skills. */
@Module({
  imports: [TenancyModule],
  controllers: [SkillsController],
  providers: [SkillsRepository, ...gatewayToolProviders(SkillTool)],
})
export class SkillsModule {}
