import { Injectable } from '@nestjs/common';
import { AppError } from '@app/errors';
import { PrismaService } from '@app/persistence';
import { SavedServerRow, SavedServersRepository, ServerUseError } from '@app/ssh';
import { SessionToolRouter } from '../tools/session-tool-router';
import { ServersService } from './servers.service';
import { SshTerminal } from './ssh-terminal';

/** The one sandbox tool an ssh session runs; file tools are refused (docs/servers.md). */
const SSH_SESSION_TOOLS = new Set(['terminal']);

export interface SshToolResult {
  output: string;
  metadata: Record<string, unknown>;
  is_error: boolean;
}

/**
 * Sessions created with `backend: {type: "ssh", server}`: which saved server each one runs
 * on, and the terminal calls sent there instead of to an executor. A session's backend never
 * changes, so lookups are cached (a session with none is cached too).
 */
@Injectable()
export class SshSessionBackends implements SessionToolRouter {
  private readonly cache = new Map<string, string | null>();
  private readonly terminal: SshTerminal;

  constructor(
    private readonly db: PrismaService,
    private readonly servers: ServersService,
    private readonly savedServers: SavedServersRepository,
  ) {
    this.terminal = new SshTerminal(servers);
  }

  /** The saved server a new session will run on; a 400 naming the field when there is none. */
  async resolveForNewSession(tenantId: string, serverName: string): Promise<SavedServerRow> {
    try {
      return await this.servers.byName(tenantId, serverName);
    } catch (err) {
      if (err instanceof ServerUseError) throw AppError.validation(`body.backend.server: ${err.message}`);
      throw err;
    }
  }

  async bind(tenantId: string, sessionId: string, server: SavedServerRow): Promise<void> {
    await this.db.tenant(tenantId, (tx) => tx.sessionSshBackend.create({ data: { sessionId, tenantId, serverId: server.id } }));
    this.cache.set(cacheKey(tenantId, sessionId), server.id);
  }

  /** The server id of an ssh session, or null for a sandbox session. */
  async serverIdOf(tenantId: string, sessionId: string): Promise<string | null> {
    const key = cacheKey(tenantId, sessionId);
    const known = this.cache.get(key);
    if (known !== undefined) return known;
    const row = await this.db.tenant(tenantId, (tx) => tx.sessionSshBackend.findFirst({ where: { tenantId, sessionId } }));
    const id = row?.serverId ?? null;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(key, id);
    return id;
  }

  /** Describes a session's backend for its API answer. */
  async describe(tenantId: string, sessionId: string): Promise<{ type: 'ssh'; server: string | null } | undefined> {
    const serverId = await this.serverIdOf(tenantId, sessionId);
    if (!serverId) return undefined;
    return { type: 'ssh', server: (await this.savedServers.get(tenantId, serverId))?.name ?? null };
  }

  /** Runs a sandbox tool call of an ssh session; undefined for any other session. */
  async route(call: { tenantId: string; sessionId: string; tool: string; args: Record<string, unknown>; timeoutSeconds: number; maxOutputChars: number }): Promise<SshToolResult | undefined> {
    const serverId = await this.serverIdOf(call.tenantId, call.sessionId);
    if (!serverId) return undefined;
    return this.execute(call.tenantId, call.sessionId, serverId, call.tool, call.args, call.timeoutSeconds, call.maxOutputChars);
  }

  private async execute(tenantId: string, sessionId: string, serverId: string, tool: string, args: Record<string, unknown>, timeoutSeconds: number, maxOutputChars: number): Promise<SshToolResult> {
    if (!SSH_SESSION_TOOLS.has(tool)) {
      return refusal(`${tool} is not available in a session whose backend is a saved SSH server: only terminal runs there. Use terminal (cat, ls, grep ...) for files on the server, or vps_download to copy one into a sandbox session's workspace.`);
    }
    const server = await this.savedServers.get(tenantId, serverId);
    if (!server) return refusal('the saved server this session runs on was deleted; create a new session');
    try {
      return await this.terminal.run(tenantId, sessionId, server, { command: String(args.command), max_wait_ms: typeof args.max_wait_ms === 'number' ? args.max_wait_ms : undefined }, timeoutSeconds, maxOutputChars);
    } catch (err) {
      if (err instanceof ServerUseError) return refusal(err.message);
      throw err;
    }
  }
}

function refusal(output: string): SshToolResult {
  return { output, metadata: { backend: 'ssh' }, is_error: true };
}

function cacheKey(tenantId: string, sessionId: string): string {
  return `${tenantId}/${sessionId}`;
}
