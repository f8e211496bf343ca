import { ToolResult } from '@app/contracts';
import { ToolDefinition } from './tool-definition';
import type { ToolContext } from './tool-dispatcher';

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
 * registered beside its definition; the ToolDispatcher validates the arguments with
 * `definition.parameters` and then calls `execute` with the parsed result.
 */
export interface GatewayTool {
  readonly definition: ToolDefinition & { runsIn: 'gateway' };
  execute(ctx: GatewayToolContext, args: Record<string, unknown>): Promise<GatewayToolResult>;
  /** Whether this deployment can run the tool (web_search needs a provider), and if not, why. */
  availability?(): ToolAvailability;
}

export interface ToolAvailability {
  available: boolean;
  reason?: string;
}

/** Nest token for the list of gateway tools the ToolRegistry registers. */
export const GATEWAY_TOOLS = Symbol('GATEWAY_TOOLS');

export function toolOutput(output: string, metadata: Record<string, unknown> = {}): GatewayToolResult {
  return { output, metadata, is_error: false };
}

/** A failure the model should read and react to (not an infrastructure failure). */
export function toolFailure(output: string, metadata: Record<string, unknown> = {}): GatewayToolResult {
  return { output, metadata, is_error: true };
}
