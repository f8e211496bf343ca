import { Inject, Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressGuard, readTenantEgressRules } from '@app/egress';
import { LOGGER } from '@app/logging';
import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import { SessionReleaseHooks } from '../sessions/session-release-hooks';
import { TenantTool, TenantToolListing, TenantToolProblem, TenantToolScope, TenantToolSource } from '../tools/tenant-tool';
import { McpConnections, McpHealthReport, McpTarget } from './mcp-connections';
import { McpConnector, McpEndpoint } from './mcp-connector';
import { McpServerRow, McpServersRepository } from './mcp-servers.repository';
import { openMcpSecrets } from './mcp-secrets';
import { mcpTenantTool } from './mcp-tool';
import { MCP_STDIO_TRANSPORTS, McpStdioTransportFactory } from './mcp-transports';

/** A server's health is written when it changes, and a success at most this often otherwise. */
const SUCCESS_WRITE_INTERVAL_MS = 60_000;

/**
 * The tenant's MCP servers as a TenantToolSource: each server's tools (from the connection
 * cache), and a `mcp.server_failed` problem for each server that could not give them. A
 * failing server never fails the listing; the run goes on with the other tools.
 */
@Injectable()
export class McpToolSource implements TenantToolSource<McpServerRow[]>, OnModuleDestroy {
  private readonly connections = new McpConnections();
  private readonly connector: McpConnector;
  private readonly cipher: CredentialCipher | undefined;
  /** What was last written per server configuration, so healthy servers do not write at every turn. */
  private readonly written = new Map<string, { ok: boolean; at: number }>();

  constructor(
    private readonly servers: McpServersRepository,
    db: PrismaService,
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    releaseHooks: SessionReleaseHooks,
    @Optional() @Inject(MCP_STDIO_TRANSPORTS) stdio?: McpStdioTransportFactory,
  ) {
    releaseHooks.register((tenantId, sessionId) => this.forgetSession(tenantId, sessionId));
    this.cipher = config.RUNBOX_CREDENTIALS_KEY ? new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS) : undefined;
    const guard = new EgressGuard({ allowPrivateHosts: config.RUNBOX_ALLOW_PRIVATE_HOSTS ?? [] });
    this.connector = new McpConnector(guard, (tenantId) => readTenantEgressRules(db, tenantId), stdio);
  }

  read(tenantId: string): Promise<McpServerRow[]> {
    return this.servers.list(tenantId);
  }

  async list(_tenantId: string, rows: McpServerRow[], scope: TenantToolScope): Promise<TenantToolListing> {
    const listings = await Promise.all(rows.map((row) => this.listServer(row, scope)));
    return { tools: listings.flatMap((l) => l.tools), problems: listings.flatMap((l) => l.problems) };
  }

  /** Drops the server's cached connections (its configuration changed, or it was deleted). */
  async forget(tenantId: string, serverId: string): Promise<void> {
    await this.connections.forget(`${tenantId}:${serverId}`);
    for (const key of this.written.keys()) if (key.startsWith(`${tenantId}:${serverId}:`)) this.written.delete(key);
  }

  /**
   * Closes the session's stdio connections (their processes run in its sandbox) as it is
   * deleted, rather than when they idle out. Connections another gateway replica holds end
   * when the sandbox goes (their reads fail) and are forgotten when idle.
   */
  async forgetSession(tenantId: string, sessionId: string): Promise<void> {
    const inSession = (key: string) => key.startsWith(`${tenantId}:`) && key.endsWith(`:${sessionId}`);
    await this.connections.forgetWhere(inSession);
    for (const key of this.written.keys()) if (key.startsWith(`${tenantId}:`) && key.includes(`:${sessionId}:`)) this.written.delete(key);
  }

  /** The keys of the cached connections: `<tenant>:<server id>`, plus `:<session>` for stdio servers. */
  connectionKeys(): string[] {
    return this.connections.keys();
  }

  async onModuleDestroy(): Promise<void> {
    await this.connections.closeAll();
  }

  private async listServer(row: McpServerRow, scope: TenantToolScope): Promise<TenantToolListing> {
    if (row.transport === 'stdio') {
      const reason = this.connector.stdioUnavailable({ tenantId: row.tenantId, sessionId: scope.sessionId });
      // Outside a session (GET /v1/tools) a stdio server is simply not listed; in a run, it is a problem.
      if (reason) return { tools: [], problems: scope.sessionId ? [failed(row, reason)] : [] };
    }
    const target = this.target(row, scope);
    const listing = await this.connections.tools(target);
    if (!listing.ok) return { tools: [], problems: [failed(row, listing.error)] };
    const tools: TenantTool[] = [];
    const problems: TenantToolProblem[] = [];
    for (const tool of listing.tools) {
      const offer = mcpTenantTool(row.name, tool, (ctx, name, args) => this.connections.call(target, name, args, { timeoutMs: ctx.timeoutMs, signal: ctx.signal }));
      if (offer.ok) tools.push(offer.tool);
      else problems.push({ key: `mcp_tool:${row.id}:${offer.name}`, event: { type: 'tool.source_skipped', data: { name: offer.name, origin: `mcp:${row.name}`, reason: offer.reason } } });
    }
    return { tools, problems };
  }

  private target(row: McpServerRow, scope: TenantToolScope): McpTarget {
    const key = row.transport === 'stdio' ? `${row.tenantId}:${row.id}:${scope.sessionId}` : `${row.tenantId}:${row.id}`;
    return {
      key,
      version: row.version,
      connect: (timeoutMs) => this.connector.connect(this.endpoint(row), { tenantId: row.tenantId, sessionId: scope.sessionId }, timeoutMs),
      onHealth: (health) => this.recordHealth(row, `${key}:${row.version}`, health),
    };
  }

  /** Opened only when connecting: header and env values stay sealed everywhere else. */
  private endpoint(row: McpServerRow): McpEndpoint {
    const secrets = openMcpSecrets(this.cipher, row.tenantId, row.id, row.secrets);
    return row.transport === 'stdio'
      ? { transport: 'stdio', command: row.command ?? '', args: row.args, env: secrets.env }
      : { transport: 'streamable_http', url: row.url ?? '', headers: secrets.headers };
  }

  private recordHealth(row: McpServerRow, key: string, health: McpHealthReport): void {
    const previous = this.written.get(key);
    const now = health.at.getTime();
    if (health.ok && previous?.ok && now - previous.at < SUCCESS_WRITE_INTERVAL_MS) return;
    this.written.set(key, { ok: health.ok, at: now });
    if (!health.ok) this.logger.warn({ tenantId: row.tenantId, mcpServer: row.name, error: health.error, parked: health.parked }, 'an MCP server failed');
    const write = health.ok
      ? { status: 'ok' as const, lastSuccessAt: health.at }
      : { status: health.parked ? ('parked' as const) : ('failing' as const), lastError: health.error, lastErrorAt: health.at };
    this.servers.recordHealth(row.tenantId, row.id, row.version, write).catch((err: unknown) => {
      this.logger.warn({ tenantId: row.tenantId, mcpServer: row.name, error: err instanceof Error ? err.message : String(err) }, 'could not record an MCP server’s health');
    });
  }
}

function failed(row: McpServerRow, error: string): TenantToolProblem {
  return { key: `mcp:${row.id}`, event: { type: 'mcp.server_failed', data: { server: row.name, error } } };
}
