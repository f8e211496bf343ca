import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressGuard, readTenantEgressRules } from '@app/egress';
import { PrismaService } from '@app/persistence';
import { AppError, ErrorCode } from '@app/errors';
import {
  credentialsAad,
  CredentialCipher,
  SavedServerChanges,
  SavedServerConnections,
  SavedServerRow,
  SavedServersRepository,
  ServerNameTakenError,
  SshAuth,
  SshConnection,
  SshConnectionPool,
} from '@app/ssh';
import { CreateServerInput, UpdateServerInput } from './servers.schemas';

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

/**
 * Saved servers: CRUD with sealed credentials, and connections to them through the egress
 * guard, the host-key pin and the connection pool.
 */
@Injectable()
export class ServersService {
  private readonly cipher: CredentialCipher | undefined;
  private readonly connections: SavedServerConnections | undefined;

  constructor(
    private readonly servers: SavedServersRepository,
    pool: SshConnectionPool,
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
    db: PrismaService,
  ) {
    if (config.RUNBOX_CREDENTIALS_KEY) {
      this.cipher = new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS);
      const egress = new EgressGuard({ allowPrivateHosts: config.RUNBOX_ALLOW_PRIVATE_HOSTS });
      this.connections = new SavedServerConnections(servers, pool, this.cipher, egress, (tenantId) => readTenantEgressRules(db, tenantId));
    }
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
        sealCredentials: (id) => cipher.seal(JSON.stringify(authOf(input)), credentialsAad(tenantId, id)),
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
      changes.credentials = this.requireCipher().seal(JSON.stringify(authOf(input)), credentialsAad(tenantId, id));
    }
    const row = await this.servers.update(tenantId, id, changes).catch((err: unknown) => Promise.reject(conflict(err)));
    if (!row) throw AppError.notFound('server', id);
    this.connections?.evict(tenantId, id);
    return viewOf(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.servers.delete(tenantId, id))) throw AppError.notFound('server', id);
    this.connections?.evict(tenantId, id);
  }

  /**
   * Replaces the pinned host key with `fingerprint` (the tenant checked it on the server), or
   * with none, so the next connection pins what it is shown.
   */
  async repin(tenantId: string, id: string, fingerprint: string | undefined): Promise<ServerView> {
    await this.require(tenantId, id);
    const row = await this.servers.update(tenantId, id, { hostKeyFingerprint: fingerprint ?? null, hostKeyPinnedAt: fingerprint ? new Date() : null });
    if (!row) throw AppError.notFound('server', id);
    this.connections?.evict(tenantId, id);
    return viewOf(row);
  }

  /** A saved server by the name the model uses. */
  byName(tenantId: string, name: string): Promise<SavedServerRow> {
    return this.requireConnections().byName(tenantId, name);
  }

  /** Runs `work` on a pooled, egress-checked, host-key-verified connection to the server. */
  withConnection<T>(tenantId: string, server: SavedServerRow, work: (c: SshConnection) => Promise<T>): Promise<T> {
    return this.requireConnections().withConnection(tenantId, server, work);
  }

  private async require(tenantId: string, id: string): Promise<SavedServerRow> {
    const row = await this.servers.get(tenantId, id);
    if (!row) throw AppError.notFound('server', id);
    return row;
  }

  private requireConnections(): SavedServerConnections {
    if (!this.connections) throw new AppError(ErrorCode.Unavailable, this.unavailableReason()!);
    return this.connections;
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

function authOf(input: { private_key?: string; passphrase?: string; password?: string }): SshAuth {
  return input.password ? { password: input.password } : { privateKey: input.private_key!, ...(input.passphrase ? { passphrase: input.passphrase } : {}) };
}

function conflict(err: unknown): unknown {
  return err instanceof ServerNameTakenError ? new AppError(ErrorCode.Conflict, err.message) : err;
}
