import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { tenantToolSourceProviders } from '../tools/tenant-tool';
import { McpServersController } from './mcp-servers.controller';
import { McpServersRepository } from './mcp-servers.repository';
import { McpServersService } from './mcp-servers.service';
import { McpStdioModule } from './mcp-stdio.module';
import { McpToolSource } from './mcp-tool-source';
import { MCP_STDIO_TRANSPORTS, McpStdioTransportFactory } from './mcp-transports';
import { SandboxStdioTransportFactory } from './sandbox-stdio-transport';

/**
 * MCP servers as tool sources (docs/mcp.md): /v1/mcp_servers, and their tools offered to the
 * tenant's runs as `mcp__<server>__<tool>`. stdio servers run inside the session's sandbox,
 * through McpStdioModule's transport; deleting a session closes its connections to them.
 */
@Module({
  imports: [TenancyModule, SessionsModule, McpStdioModule],
  controllers: [McpServersController],
  providers: [
    McpServersRepository,
    McpServersService,
    ...tenantToolSourceProviders(McpToolSource),
    {
      provide: MCP_STDIO_TRANSPORTS,
      inject: [SandboxStdioTransportFactory],
      useFactory: (factory: SandboxStdioTransportFactory): McpStdioTransportFactory => (ctx, spec) => factory.create(ctx, spec),
    },
  ],
})
export class McpModule {}
