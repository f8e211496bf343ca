import { ToolResult } from '@app/contracts';

/**
 * Runs a session's sandbox tool calls somewhere other than an executor, for sessions whose
 * backend says so (a saved SSH server). `route` answers undefined for sessions it does not
 * serve, and those calls go to the executor as usual.
 */
export interface SessionToolRouter {
  route(call: { tenantId: string; sessionId: string; tool: string; args: Record<string, unknown>; timeoutSeconds: number; maxOutputChars: number }): Promise<ToolResult | undefined>;
}

export const SESSION_TOOL_ROUTER = Symbol('SESSION_TOOL_ROUTER');
