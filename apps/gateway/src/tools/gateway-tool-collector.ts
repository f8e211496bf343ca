import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { GATEWAY_TOOLS, GatewayTool, SANDBOX_TOOLS, SandboxToolContribution } from './gateway-tool';
import { ToolRegistry } from './tool-registry';

/**
 * Registers the gateway tools every feature module contributes under GATEWAY_TOOLS (see
 * gatewayToolProviders), and the sandbox tools contributed under SANDBOX_TOOLS. Nest has no multi-providers, and one tool needs what needs the
 * registry (delegate_task drives sub-runs through the run loop, which reads the registry),
 * so the registry does not take the tools in its constructor: they are collected here once
 * every provider is built, before the application starts taking runs or requests.
 */
@Injectable()
export class GatewayToolCollector implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly registry: ToolRegistry,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) {
      if (wrapper.token === GATEWAY_TOOLS) for (const tool of wrapper.instance as GatewayTool[]) this.registry.registerGatewayTool(tool);
      if (wrapper.token === SANDBOX_TOOLS) for (const tool of wrapper.instance as SandboxToolContribution[]) this.registry.registerSandboxTool(tool);
    }
  }
}
