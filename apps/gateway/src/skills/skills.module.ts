import { Module } from '@nestjs/common';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { SkillTool } from './skill.tool';
import { SkillsRepository } from './skills.repository';

/** Skills: built-in and tenant-written instructions the skill tool lists, reads and writes. */
@Module({
  providers: [SkillsRepository, ...gatewayToolProviders(SkillTool)],
})
export class SkillsModule {}
