import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { tenantToolSourceProviders } from '../tools/tenant-tool';
import { McpServersController } from './mcp-servers.controller';
import { McpServersRepository } from './mcp-servers.repository';
import { McpServersService } from './mcp-servers.service';
import { McpToolSource } from './mcp-tool-source';

/**
 * MCP servers as tool sources (docs/mcp.md): /v1/mcp_servers, and their tools offered to the
 * tenant's runs as `mcp__<server>__<tool>`. stdio servers need MCP_STDIO_TRANSPORTS, which the
 * module running processes in sandboxes provides; without it they are reported unavailable.
 */
@Module({
  imports: [TenancyModule],
  controllers: [McpServersController],
  providers: [McpServersRepository, McpServersService, ...tenantToolSourceProviders(McpToolSource)],
})
export class McpModule {}
