import { Provider, Type } from '@nestjs/common';
import { ToolResult } from '@app/contracts';
import { ToolDefinition } from './tool-definition';
import type { ToolContext } from './tool-router';

/** What a gateway tool gets besides its arguments: the call's context with its limits resolved. */
export interface GatewayToolContext extends ToolContext {
  maxOutputChars: number;
  /** The tool's time limit (its default, or the run's `limits.timeouts`). */
  timeoutMs: number;
}

/** A gateway tool's answer; `executorId` is set when it made the session's sandbox on the way. */
export type GatewayToolResult = ToolResult & { executorId?: string };

/**
 * A tool that runs in the gateway (Postgres-backed memory, search, todos, skills ...). It is
 * registered beside its definition; the ToolRouter validates the arguments with
 * `definition.parameters` and then calls `execute` with the parsed result.
 */
export interface GatewayTool {
  readonly definition: ToolDefinition & { runsIn: 'gateway' };
  execute(ctx: GatewayToolContext, args: Record<string, unknown>): Promise<GatewayToolResult>;
  /** Why the tool cannot run on this deployment (a provider not configured, say); undefined when it can. */
  unavailableReason?(): string | undefined;
}

/** Nest token under which each feature module contributes its gateway tools to the ToolRegistry. */
export const GATEWAY_TOOLS = Symbol('GATEWAY_TOOLS');

/** A feature module's gateway tools and its GATEWAY_TOOLS contribution of them, for its `providers`. */
export function gatewayToolProviders(...tools: Array<Type<GatewayTool>>): Provider[] {
  return [...tools, { provide: GATEWAY_TOOLS, inject: tools, useFactory: (...instances: GatewayTool[]) => instances }];
}

/**
 * Tools a feature module adds that run where the session's workspace is (sent to the
 * executor like the file tools): their definitions, and why the deployment cannot run them
 * when it cannot. GatewayToolCollector registers them with the catalogue.
 */
export const SANDBOX_TOOLS = Symbol('SANDBOX_TOOLS');

export interface SandboxToolContribution {
  definition: ToolDefinition;
  unavailableReason?(): string | undefined;
}

export function toolOutput(output: string, metadata: Record<string, unknown> = {}): GatewayToolResult {
  return { output, metadata, is_error: false };
}

/** A failure the model should read and react to (not an infrastructure failure). */
export function toolFailure(output: string, metadata: Record<string, unknown> = {}): GatewayToolResult {
  return { output, metadata, is_error: true };
}
