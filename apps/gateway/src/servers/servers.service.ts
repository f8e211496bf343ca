import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressGuard, EgressRefusedError } from '@app/egress';
import { AppError, ErrorCode } from '@app/errors';
import { createHash } from 'node:crypto';
import { CredentialCipher } from './credential-cipher';
import { SavedServerChanges, SavedServerRow, ServerNameTakenError, ServersRepository } from './servers.repository';
import { CreateServerInput, UpdateServerInput } from './servers.schemas';
import { SshConnectionPool } from './ssh-connection-pool';
import { SshAuth, SshConnectError, SshConnection } from './ssh-connector';
import { tenantEgressRules } from './tenant-egress-rules';
import { HostKeyMismatchError } from './host-key';
import { ChannelOpenError } from './remote-command';

/** What the API and the model may see of a saved server: never its credentials. */
export interface ServerView {
  id: string;
  name: string;
  host: string;
  port: number;
  username: string;
  auth: 'key' | 'password';
  host_key_fingerprint: string | null;
  host_key_pinned_at: string | null;
  created_at: string;
  updated_at: string;
}

/** How long connecting may take, TCP through authentication. */
export const SSH_CONNECT_TIMEOUT_MS = 15_000;

/** A tool-facing failure: the message says what went wrong and is safe for the model. */
export class ServerUseError extends Error {}

/**
 * Saved servers: CRUD with sealed credentials, and connections to them through the egress
 * guard, the host-key pin and the connection pool.
 */
@Injectable()
export class ServersService {
  private readonly cipher: CredentialCipher | undefined;
  private readonly egress: EgressGuard;

  constructor(
    private readonly servers: ServersRepository,
    private readonly pool: SshConnectionPool,
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
  ) {
    this.cipher = config.RUNBOX_CREDENTIALS_KEY ? new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS) : undefined;
    this.egress = new EgressGuard({ allowPrivateHosts: config.RUNBOX_ALLOW_PRIVATE_HOSTS });
  }

  /** Why saved servers are off on this deployment, or undefined when they are on. */
  unavailableReason(): string | undefined {
    return this.cipher ? undefined : 'saved servers need RUNBOX_CREDENTIALS_KEY (the key that encrypts their credentials); the operator has not set it';
  }

  async create(tenantId: string, input: CreateServerInput): Promise<ServerView> {
    const cipher = this.requireCipher();
    try {
      const row = await this.servers.create(tenantId, {
        name: input.name,
        host: input.host,
        port: input.port,
        username: input.username,
        authType: input.password ? 'password' : 'key',
        sealCredentials: (id) => cipher.seal(JSON.stringify(authOf(input)), aad(tenantId, id)),
      });
      return viewOf(row);
    } catch (err) {
      throw conflict(err);
    }
  }

  async list(tenantId: string): Promise<ServerView[]> {
    return (await this.servers.list(tenantId)).map(viewOf);
  }

  async get(tenantId: string, id: string): Promise<ServerView> {
    return viewOf(await this.require(tenantId, id));
  }

  /**
   * Changes a saved server. New credentials replace the old ones whole; a changed host or
   * port drops the pinned host key (it is another machine, pinned again on first connect).
   */
  async update(tenantId: string, id: string, input: UpdateServerInput): Promise<ServerView> {
    const current = await this.require(tenantId, id);
    const changes: SavedServerChanges = {};
    if (input.name !== undefined) changes.name = input.name;
    if (input.username !== undefined) changes.username = input.username;
    if ((input.host !== undefined && input.host !== current.host) || (input.port !== undefined && input.port !== current.port)) {
      changes.host = input.host ?? current.host;
      changes.port = input.port ?? current.port;
      changes.hostKeyFingerprint = null;
      changes.hostKeyPinnedAt = null;
    }
    if (input.private_key || input.password) {
      changes.authType = input.password ? 'password' : 'key';
      changes.credentials = this.requireCipher().seal(JSON.stringify(authOf(input)), aad(tenantId, id));
    }
    const row = await this.servers.update(tenantId, id, changes).catch((err: unknown) => Promise.reject(conflict(err)));
    if (!row) throw AppError.notFound('server', id);
    this.pool.evict(poolKey(tenantId, id));
    return viewOf(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.servers.delete(tenantId, id))) throw AppError.notFound('server', id);
    this.pool.evict(poolKey(tenantId, id));
  }

  /**
   * Replaces the pinned host key with `fingerprint` (the tenant checked it on the server), or
   * with none, so the next connection pins what it is shown.
   */
  async repin(tenantId: string, id: string, fingerprint: string | undefined): Promise<ServerView> {
    await this.require(tenantId, id);
    const row = await this.servers.update(tenantId, id, { hostKeyFingerprint: fingerprint ?? null, hostKeyPinnedAt: fingerprint ? new Date() : null });
    if (!row) throw AppError.notFound('server', id);
    this.pool.evict(poolKey(tenantId, id));
    return viewOf(row);
  }

  /** A saved server by the name the model uses. */
  async byName(tenantId: string, name: string): Promise<SavedServerRow> {
    const row = await this.servers.getByName(tenantId, name);
    if (!row) {
      const names = (await this.servers.list(tenantId)).map((s) => s.name);
      throw new ServerUseError(`no saved server is named "${name}"; ${names.length ? `saved servers: ${names.join(', ')}` : 'this tenant has no saved servers (POST /v1/servers)'}`);
    }
    return row;
  }

  /**
   * Runs `work` on a pooled connection to the server: the host passes the egress guard (the
   * connection goes to the address it checked), the host key must match the pin, and a
   * first connection pins the key it was shown.
   */
  async withConnection<T>(tenantId: string, server: SavedServerRow, work: (c: SshConnection) => Promise<T>): Promise<T> {
    const cipher = this.requireCipher();
    const version = createHash('sha256').update([server.host, server.port, server.username, server.credentials, server.hostKeyFingerprint ?? ''].join('\0')).digest('hex');
    const open = async () => {
      const target = await this.egress.checkHost(server.host, server.port, await tenantEgressRules(tenantId));
      const auth = JSON.parse(cipher.open(server.credentials, aad(tenantId, server.id))) as SshAuth;
      return { serverName: server.name, address: target.address, port: server.port, username: server.username, auth, pinnedFingerprint: server.hostKeyFingerprint };
    };
    const attempt = () =>
      this.pool.use(poolKey(tenantId, server.id), version, open, SSH_CONNECT_TIMEOUT_MS, async (connection) => {
        if (!server.hostKeyFingerprint) await this.pinFirstKey(tenantId, server, connection.fingerprint);
        return work(connection);
      });
    try {
      try {
        return await attempt();
      } catch (err) {
        // A pooled connection that died unnoticed: no channel opened, so nothing ran.
        // Once more on a fresh connection (which checks the host key again).
        if (!(err instanceof ChannelOpenError)) throw err;
        this.pool.evict(poolKey(tenantId, server.id));
        return await attempt();
      }
    } catch (err) {
      if (err instanceof EgressRefusedError || err instanceof HostKeyMismatchError || err instanceof SshConnectError) throw new ServerUseError(err.message);
      if (err instanceof ChannelOpenError) throw new ServerUseError(`server "${server.name}" did not open a channel: ${err.message}`);
      throw err;
    }
  }

  private async pinFirstKey(tenantId: string, server: SavedServerRow, fingerprint: string): Promise<void> {
    if (await this.servers.pinIfUnpinned(tenantId, server.id, fingerprint)) return;
    // Another call pinned first: that pin must be the key this connection saw.
    const now = await this.servers.get(tenantId, server.id);
    if (now?.hostKeyFingerprint && now.hostKeyFingerprint !== fingerprint) {
      this.pool.evict(poolKey(tenantId, server.id));
      throw new HostKeyMismatchError(server.name, now.hostKeyFingerprint, fingerprint);
    }
  }

  private async require(tenantId: string, id: string): Promise<SavedServerRow> {
    const row = await this.servers.get(tenantId, id);
    if (!row) throw AppError.notFound('server', id);
    return row;
  }

  private requireCipher(): CredentialCipher {
    if (!this.cipher) throw new AppError(ErrorCode.Unavailable, this.unavailableReason()!);
    return this.cipher;
  }
}

export function viewOf(row: SavedServerRow): ServerView {
  return {
    id: row.id,
    name: row.name,
    host: row.host,
    port: row.port,
    username: row.username,
    auth: row.authType,
    host_key_fingerprint: row.hostKeyFingerprint,
    host_key_pinned_at: row.hostKeyPinnedAt?.toISOString() ?? null,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

/** The sealed value is bound to its row: copied into another tenant's or server's row it does not open. */
export function aad(tenantId: string, serverId: string): string {
  return `runbox.servers:${tenantId}:${serverId}`;
}

function poolKey(tenantId: string, serverId: string): string {
  return `${tenantId}/${serverId}`;
}

function authOf(input: { private_key?: string; passphrase?: string; password?: string }): SshAuth {
  return input.password ? { password: input.password } : { privateKey: input.private_key!, ...(input.passphrase ? { passphrase: input.passphrase } : {}) };
}

function conflict(err: unknown): unknown {
  return err instanceof ServerNameTakenError ? new AppError(ErrorCode.Conflict, err.message) : err;
}
