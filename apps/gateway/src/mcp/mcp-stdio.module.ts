import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { SandboxStdioClient } from './sandbox-stdio.client';
import { SandboxStdioTransportFactory } from './sandbox-stdio-transport';

/**
 * stdio MCP servers inside sessions' sandboxes: import this module and inject
 * SandboxStdioTransportFactory to get an SDK Transport for one (docs/mcp.md).
 */
@Module({
  imports: [SessionsModule],
  providers: [SandboxStdioClient, SandboxStdioTransportFactory],
  exports: [SandboxStdioTransportFactory],
})
export class McpStdioModule {}
