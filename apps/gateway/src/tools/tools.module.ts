import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ExecutorsModule } from '../executors/executors.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { ExecutorClient } from './executor.client';
import { GatewayToolCollector } from './gateway-tool-collector';
import { SandboxFiles } from './sandbox-files';
import { TenantTools } from './tenant-tools';
import { ToolRouter } from './tool-router';
import { ToolRegistry } from './tool-registry';
import { ToolsController } from './tools.controller';

/**
 * The tool catalogue and the way to run a call: the registry (sandbox tools, plus the
 * gateway tools feature modules contribute), the tools tenants add (TenantTools, from the
 * TENANT_TOOL_SOURCES feature modules contribute), the router, and the executor client.
 */
@Module({
  imports: [DiscoveryModule, TenancyModule, ExecutorsModule],
  controllers: [ToolsController],
  providers: [{ provide: ToolRegistry, useFactory: () => new ToolRegistry() }, GatewayToolCollector, TenantTools, ToolRouter, ExecutorClient, SandboxFiles],
  exports: [ToolRegistry, TenantTools, ToolRouter, ExecutorClient, SandboxFiles],
})
export class ToolsModule {}
