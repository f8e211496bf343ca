import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TOOLSET_NAMES, ToolRegistry } from './tool-registry';

@Controller('v1')
@UseGuards(ApiKeyGuard)
export class ToolsController {
  constructor(private readonly registry: ToolRegistry) {}

  @Get('tools')
  tools() {
    return { data: this.registry.manifest() };
  }

  @Get('toolsets')
  toolsets() {
    return { data: TOOLSET_NAMES.map((name) => ({ name, tools: this.registry.toolset(name) })) };
  }
}
