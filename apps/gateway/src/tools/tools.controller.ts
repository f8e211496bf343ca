import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { TenantTool } from './tenant-tool';
import { TenantTools } from './tenant-tools';
import { ToolManifestEntry, TOOLSET_NAMES, ToolRegistry } from './tool-registry';
import { toolListSchema, toolsetListSchema } from './tools.responses';

@Controller('v1')
@UseGuards(ApiKeyGuard)
export class ToolsController {
  constructor(
    private readonly registry: ToolRegistry,
    private readonly tenantTools: TenantTools,
  ) {}

  /** The built-in catalogue, then the tools the caller's tenant added (MCP servers, OpenAPI services). */
  @Get('tools')
  @ApiOperation({ summary: 'The tools runs can be given: the built-in catalogue and those the tenant added', response: toolListSchema })
  async tools(@TenantId() tenantId: string) {
    const own = await this.tenantTools.list(tenantId);
    return { data: [...this.registry.manifest(), ...[...own.tools.values()].map(tenantManifestEntry)] };
  }

  @Get('toolsets')
  @ApiOperation({ summary: 'The named toolsets and the tools in each', response: toolsetListSchema, tag: 'tools' })
  async toolsets(@TenantId() tenantId: string) {
    const own = [...(await this.tenantTools.list(tenantId)).tools.keys()];
    return { data: TOOLSET_NAMES.map((name) => ({ name, tools: name === 'all' ? [...this.registry.toolset(name), ...own].sort() : this.registry.toolset(name) })) };
  }
}

function tenantManifestEntry(tool: TenantTool): ToolManifestEntry & { origin: string } {
  const { definition } = tool;
  return {
    name: definition.name,
    description: definition.description,
    parameters: tool.inputSchema,
    mutating: definition.mutating,
    toolsets: ['all'],
    available: true,
    origin: tool.origin,
  };
}
