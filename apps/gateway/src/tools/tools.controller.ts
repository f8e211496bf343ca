import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { noQuerySchema } from '../common/metadata';
import { validate } from '../common/validate';
import { TOOLSET_NAMES, ToolRegistry } from './tool-registry';

@Controller('v1')
@UseGuards(ApiKeyGuard)
export class ToolsController {
  constructor(private readonly registry: ToolRegistry) {}

  @Get('tools')
  tools(@Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return { data: this.registry.manifest() };
  }

  @Get('toolsets')
  toolsets(@Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return { data: TOOLSET_NAMES.map((name) => ({ name, tools: this.registry.toolset(name) })) };
  }
}
