import { DomainRules, EgressGuard, EgressRefusedError } from '@app/egress';
import { createHash } from 'node:crypto';
import { CredentialCipher } from './credential-cipher';
import { HostKeyMismatchError } from './host-key';
import { SavedServerRow, SavedServersRepository } from './saved-servers.repository';
import { SshConnectionPool } from './ssh-connection-pool';
import { ChannelOpenError, SshAuth, SshConnectError, SshConnection } from './ssh-connector';

/** How long connecting may take, TCP through authentication. */
export const SSH_CONNECT_TIMEOUT_MS = 15_000;

/** A failure to use a saved server; the message says what went wrong and is safe for the model. */
export class ServerUseError extends Error {}

/** The sealed value is bound to its row: copied into another tenant's or server's row it does not open. */
export function credentialsAad(tenantId: string, serverId: string): string {
  return `runbox.servers:${tenantId}:${serverId}`;
}

/** Where the tenant's outbound connections may go (its egress domain rules). */
export type TenantEgressRules = (tenantId: string) => Promise<DomainRules>;

/**
 * Connections to saved servers, for whichever service runs the tool (the gateway for
 * vps_run, the executor for transfers): the host passes the egress guard and the connection
 * goes to the address it checked, credentials are opened only here, the host key must match
 * the pin, and a first connection pins the key it was shown.
 */
export class SavedServerConnections {
  constructor(
    private readonly servers: SavedServersRepository,
    private readonly pool: SshConnectionPool,
    private readonly cipher: CredentialCipher,
    private readonly egress: EgressGuard,
    private readonly egressRules: TenantEgressRules,
  ) {}

  /** A saved server by the name the model uses. */
  async byName(tenantId: string, name: string): Promise<SavedServerRow> {
    const row = await this.servers.getByName(tenantId, name);
    if (!row) {
      const names = (await this.servers.list(tenantId)).map((s) => s.name);
      throw new ServerUseError(`no saved server is named "${name}"; ${names.length ? `saved servers: ${names.join(', ')}` : 'this tenant has no saved servers (POST /v1/servers)'}`);
    }
    return row;
  }

  /** Runs `work` on the server's pooled connection (see the class comment). */
  async withConnection<T>(tenantId: string, server: SavedServerRow, work: (c: SshConnection) => Promise<T>): Promise<T> {
    // The tenant's domain rules are read for every call and are part of what a pooled
    // connection was checked against: when they change, the next call connects (and is
    // checked) again instead of reusing a connection the new rules may refuse.
    const rules = await this.egressRules(tenantId);
    const version = createHash('sha256')
      .update([server.host, server.port, server.username, server.credentials, server.hostKeyFingerprint ?? '', JSON.stringify(rules)].join('\0'))
      .digest('hex');
    const open = async () => {
      const target = await this.egress.checkHost(server.host, server.port, rules);
      const auth = JSON.parse(this.cipher.open(server.credentials, credentialsAad(tenantId, server.id))) as SshAuth;
      return { serverName: server.name, address: target.address, port: server.port, username: server.username, auth, pinnedFingerprint: server.hostKeyFingerprint };
    };
    const key = poolKey(tenantId, server.id);
    const attempt = () =>
      this.pool.use(key, version, open, SSH_CONNECT_TIMEOUT_MS, async (connection) => {
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
        this.pool.evict(key);
        return await attempt();
      }
    } catch (err) {
      if (err instanceof EgressRefusedError || err instanceof HostKeyMismatchError || err instanceof SshConnectError) throw new ServerUseError(err.message);
      if (err instanceof ChannelOpenError) throw new ServerUseError(`server "${server.name}" did not open a channel: ${err.message}`);
      throw err;
    }
  }

  /** Closes the server's pooled connection (after an edit, a re-pin or a delete). */
  evict(tenantId: string, serverId: string): void {
    this.pool.evict(poolKey(tenantId, serverId));
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
}

function poolKey(tenantId: string, serverId: string): string {
  return `${tenantId}/${serverId}`;
}
