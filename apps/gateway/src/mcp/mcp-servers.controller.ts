import { Controller, Delete, Get, HttpCode, Patch, Post, UseGuards } from '@nestjs/common';
import { z } from 'zod';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody } from '../common/validation/request-parts';
import { createMcpServerSchema, updateMcpServerSchema } from './mcp-servers.schemas';
import { McpServersService } from './mcp-servers.service';

/** The tenant's MCP servers. Header and environment values go in and are never given back. */
@Controller('v1/mcp_servers')
@UseGuards(ApiKeyGuard)
export class McpServersController {
  constructor(private readonly servers: McpServersService) {}

  @Post()
  async create(@TenantId() tenantId: string, @ValidBody(createMcpServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createMcpServerSchema>) {
    return this.servers.create(tenantId, input);
  }

  @Get()
  async list(@TenantId() tenantId: string) {
    return { data: await this.servers.list(tenantId) };
  }

  @Get(':id')
  async get(@TenantId() tenantId: string, @PathId('mcp_server') id: string) {
    return this.servers.get(tenantId, id);
  }

  @Patch(':id')
  async update(
    @TenantId() tenantId: string,
    @PathId('mcp_server') id: string,
    @ValidBody(updateMcpServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof updateMcpServerSchema>,
  ) {
    return this.servers.update(tenantId, id, input);
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@TenantId() tenantId: string, @PathId('mcp_server') id: string): Promise<void> {
    await this.servers.delete(tenantId, id);
  }
}
