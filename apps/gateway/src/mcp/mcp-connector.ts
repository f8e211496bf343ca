import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { DomainRules, EgressGuard } from '@app/egress';
import { USER_AGENT } from '../web/outbound';
import { McpLink } from './mcp-connections';
import { McpFetch, mcpFetch } from './mcp-fetch';
import { McpStdioTransportFactory } from './mcp-transports';

/** Bytes of one HTTP response from an MCP server (a tool list, a result, an SSE stream). */
export const MAX_MCP_RESPONSE_BYTES = 4 * 1024 * 1024;
/**
 * A safety net for a socket that never answers; each request's own limit (connect, list, the
 * call's time limit) is shorter and applies first. It is long because a server answering in
 * plain JSON sends its headers only once the tool has finished.
 */
const HEADERS_TIMEOUT_MS = 15 * 60_000;

/** Statuses with which a server says it does not speak streamable HTTP (it predates it): try SSE. */
const LEGACY_STATUSES = new Set([400, 404, 405]);

export type McpEndpoint =
  | { transport: 'streamable_http'; url: string; headers: Record<string, string> }
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string> };

export interface McpConnectScope {
  tenantId: string;
  sessionId?: string;
}

export class StdioUnavailableError extends Error {}

/**
 * Opens MCP connections: remote servers over streamable HTTP (falling back to the older
 * HTTP+SSE transport) through the egress guard; stdio servers through the transport the
 * sandbox module provides, inside the session's sandbox.
 */
export class McpConnector {
  constructor(
    private readonly guard: EgressGuard,
    private readonly rules: (tenantId: string) => Promise<DomainRules>,
    private readonly stdio: McpStdioTransportFactory | undefined,
  ) {}

  /** Why a stdio server cannot be used in this scope, or undefined when it can. */
  stdioUnavailable(scope: McpConnectScope): string | undefined {
    if (!this.stdio) return 'stdio MCP servers cannot run on this deployment (no sandbox transport for them is installed)';
    if (!scope.sessionId) return 'a stdio MCP server runs in a session’s sandbox, so it is listed within a session only';
    return undefined;
  }

  async connect(endpoint: McpEndpoint, scope: McpConnectScope, timeoutMs: number): Promise<McpLink> {
    if (endpoint.transport === 'stdio') {
      const reason = this.stdioUnavailable(scope);
      if (reason) throw new StdioUnavailableError(reason);
      const transport = this.stdio!({ tenantId: scope.tenantId, sessionId: scope.sessionId! }, { command: endpoint.command, args: endpoint.args, env: endpoint.env });
      return open(transport, timeoutMs);
    }
    const fetch = mcpFetch(this.guard, () => this.rules(scope.tenantId), { headersTimeoutMs: HEADERS_TIMEOUT_MS, maxResponseBytes: MAX_MCP_RESPONSE_BYTES });
    const requestInit = { headers: { 'user-agent': USER_AGENT, ...endpoint.headers } };
    const url = new URL(endpoint.url);
    try {
      return await open(new StreamableHTTPClientTransport(url, { fetch, requestInit }), timeoutMs);
    } catch (err) {
      if (!(err instanceof StreamableHTTPError && err.code !== undefined && LEGACY_STATUSES.has(err.code))) throw err;
      return open(new SSEClientTransport(url, { fetch: fetch satisfies McpFetch, requestInit }), timeoutMs);
    }
  }
}

async function open(transport: Transport, timeoutMs: number): Promise<McpLink> {
  const client = new Client({ name: 'runbox', version: USER_AGENT.split('/')[1] ?? 'dev' });
  const close = () => client.close().catch(() => undefined);
  try {
    await client.connect(transport, { timeout: timeoutMs });
  } catch (err) {
    await close();
    throw err;
  }
  return { client, close };
}
