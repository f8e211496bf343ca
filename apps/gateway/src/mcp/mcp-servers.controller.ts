import { Controller, Delete, Get, HttpCode, Patch, Post, UseGuards } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody } from '../common/validation/request-parts';
import { mcpServerListSchema, mcpServerSchema } from './mcp-servers.responses';
import { createMcpServerSchema, updateMcpServerSchema } from './mcp-servers.schemas';
import { McpServersService } from './mcp-servers.service';

/** The tenant's MCP servers. Header and environment values go in and are never given back. */
@Controller('v1/mcp_servers')
@UseGuards(ApiKeyGuard)
export class McpServersController {
  constructor(private readonly servers: McpServersService) {}

  @Post()
  @ApiOperation({ summary: 'Add an MCP server', response: mcpServerSchema, errors: [ErrorCode.Conflict] })
  async create(@TenantId() tenantId: string, @ValidBody(createMcpServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createMcpServerSchema>) {
    return this.servers.create(tenantId, input);
  }

  @Get()
  @ApiOperation({ summary: "List the tenant's MCP servers", response: mcpServerListSchema })
  async list(@TenantId() tenantId: string) {
    return { data: await this.servers.list(tenantId) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get an MCP server', response: mcpServerSchema })
  async get(@TenantId() tenantId: string, @PathId('mcp_server') id: string) {
    return this.servers.get(tenantId, id);
  }

  @Patch(':id')
  @ApiOperation({ summary: 'Change an MCP server', response: mcpServerSchema, errors: [ErrorCode.Conflict] })
  async update(
    @TenantId() tenantId: string,
    @PathId('mcp_server') id: string,
    @ValidBody(updateMcpServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof updateMcpServerSchema>,
  ) {
    return this.servers.update(tenantId, id, input);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete an MCP server' })
  async delete(@TenantId() tenantId: string, @PathId('mcp_server') id: string): Promise<void> {
    await this.servers.delete(tenantId, id);
  }
}
