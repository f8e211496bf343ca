import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/** Which sandbox a stdio server's process runs in: the session's, for its tenant. */
export interface McpStdioContext {
  tenantId: string;
  sessionId: string;
}

/** The process a stdio server is, as the tenant configured it (env values already unsealed). */
export interface McpStdioSpec {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
}

/**
 * Makes the SDK transport of a stdio MCP server, whose process runs inside the session's
 * sandbox (never on a gateway or executor host). The MCP client calls `start()` on it when it
 * connects and `close()` when it drops the connection, which must end the process.
 */
export type McpStdioTransportFactory = (ctx: McpStdioContext, spec: McpStdioSpec) => Transport;

/**
 * Nest token of the McpStdioTransportFactory, provided by the module that runs processes in
 * sandboxes. It is optional: without it, stdio servers are listed as unavailable (a
 * `mcp.server_failed` problem saying so) and every streamable HTTP server works as usual.
 */
export const MCP_STDIO_TRANSPORTS = Symbol('MCP_STDIO_TRANSPORTS');
