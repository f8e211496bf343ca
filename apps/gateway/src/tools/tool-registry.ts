import { z } from 'zod';
import { FILE_TOOLS } from './definitions/file-tools';
import { TERMINAL_TOOL } from './definitions/terminal-tool';
import { GatewayTool, SandboxToolContribution } from './gateway-tool';
import { ToolDefinition, ToolsetName } from './tool-definition';

export const TOOLSET_NAMES = ['minimal', 'coding', 'research', 'browser', 'default', 'all'] as const;
export type ToolsetChoice = (typeof TOOLSET_NAMES)[number];

export interface ToolManifestEntry {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  mutating: boolean;
  toolsets: string[];
  /** False when the tool cannot run on this deployment; `unavailable_reason` says why. */
  available: boolean;
  unavailable_reason?: string;
}

/**
 * Every tool this gateway can offer, and the named toolsets over them. The sandbox tools are
 * built in; gateway tools come from the feature modules (GatewayToolCollector).
 */
export class ToolRegistry {
  private readonly tools = new Map<string, ToolDefinition>();
  private readonly schemas = new Map<string, Record<string, unknown>>();
  private readonly gatewayTools = new Map<string, GatewayTool>();
  private readonly sandboxAvailability = new Map<string, () => string | undefined>();

  constructor(gatewayTools: GatewayTool[] = []) {
    for (const tool of [...FILE_TOOLS, TERMINAL_TOOL]) this.register(tool);
    for (const tool of gatewayTools) this.registerGatewayTool(tool);
  }

  /** Registers a tool that runs in the gateway, with the code that runs it. */
  registerGatewayTool(tool: GatewayTool): void {
    this.register(tool.definition);
    this.gatewayTools.set(tool.definition.name, tool);
  }

  /** Registers a tool a feature adds that runs in the sandbox, with what says whether it can run here. */
  registerSandboxTool(tool: SandboxToolContribution): void {
    this.register(tool.definition);
    if (tool.unavailableReason) this.sandboxAvailability.set(tool.definition.name, () => tool.unavailableReason?.());
  }

  gatewayTool(name: string): GatewayTool | undefined {
    return this.gatewayTools.get(name);
  }

  register(tool: ToolDefinition): void {
    this.tools.set(tool.name, tool);
    const schema = z.toJSONSchema(tool.parameters, { io: 'input' }) as Record<string, unknown>;
    delete schema.$schema;
    this.schemas.set(tool.name, schema);
  }

  /** Why a registered tool cannot run on this deployment, or undefined when it can. */
  unavailableReason(name: string): string | undefined {
    return this.gatewayTools.has(name) ? this.gatewayTools.get(name)?.unavailableReason?.() : this.sandboxAvailability.get(name)?.();
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name);
  }

  names(): string[] {
    return [...this.tools.keys()].sort();
  }

  /** The tools of a toolset (TOOLS.md): default is the union of the named four, all is everything. */
  toolset(name: ToolsetChoice): string[] {
    if (name === 'all') return this.names();
    const members = (t: ToolDefinition) =>
      name === 'default' ? t.toolsets.length > 0 : t.toolsets.includes(name as ToolsetName);
    return [...this.tools.values()].filter(members).map((t) => t.name).sort();
  }

  manifest(names?: Iterable<string>): ToolManifestEntry[] {
    const wanted = names ? [...names].sort() : this.names();
    return wanted
      .map((n) => this.tools.get(n))
      .filter((t): t is ToolDefinition => t !== undefined)
      .map((t) => ({
        name: t.name,
        description: t.description,
        parameters: this.schemas.get(t.name) ?? {},
        mutating: t.mutating,
        toolsets: [...t.toolsets, ...(t.toolsets.length > 0 ? ['default'] : []), 'all'],
        ...availability(this.unavailableReason(t.name)),
      }));
  }
}

function availability(reason: string | undefined): { available: boolean; unavailable_reason?: string } {
  return reason === undefined ? { available: true } : { available: false, unavailable_reason: reason };
}
