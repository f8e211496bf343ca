import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { LOGGER } from '@app/logging';
import type { Client } from 'ssh2';
import type { Logger } from 'pino';
import { SshConnection, SshConnector, SshTarget } from './ssh-connector';

/** A pooled connection unused this long is closed. */
export const SSH_IDLE_CLOSE_MS = 60_000;
const SWEEP_EVERY_MS = 10_000;

interface PooledConnection {
  /** What the connection was opened with; a saved server edited since gets a new one. */
  version: string;
  connection: Promise<SshConnection>;
  client?: Client;
  users: number;
  lastUsed: number;
}

/**
 * One SSH connection per (tenant, server), shared by the calls that use it (each call opens
 * its own channel) and closed after SSH_IDLE_CLOSE_MS without use. A connection that fails
 * or closes leaves the pool, so the next call connects again.
 */
@Injectable()
export class SshConnectionPool implements OnModuleDestroy {
  private readonly pool = new Map<string, PooledConnection>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly connector: SshConnector,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.sweeper = setInterval(() => this.closeIdle(), SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  /**
   * Runs `work` on the server's connection, opening it if needed. `version` identifies the
   * saved server's connection settings (a changed one closes the old connection).
   */
  async use<T>(key: string, version: string, open: () => Promise<SshTarget>, timeoutMs: number, work: (c: SshConnection) => Promise<T>): Promise<T> {
    let entry = this.pool.get(key);
    if (entry && entry.version !== version) {
      this.close(key, entry);
      entry = undefined;
    }
    if (!entry) {
      const fresh: PooledConnection = { version, users: 0, lastUsed: Date.now(), connection: open().then((t) => this.connector.connect(t, timeoutMs)) };
      entry = fresh;
      this.pool.set(key, fresh);
      fresh.connection.then(
        ({ client }) => {
          fresh.client = client;
          const drop = () => this.pool.get(key) === fresh && this.pool.delete(key);
          client.once('close', drop);
          client.on('error', (err) => {
            this.logger.debug({ server: key, reason: err.message }, 'pooled SSH connection failed');
            drop();
          });
        },
        () => this.pool.get(key) === fresh && this.pool.delete(key),
      );
    }
    entry.users++;
    try {
      return await work(await entry.connection);
    } finally {
      entry.users--;
      entry.lastUsed = Date.now();
    }
  }

  /** Closes the server's connection (after an edit, a re-pin or a delete). */
  evict(key: string): void {
    const entry = this.pool.get(key);
    if (entry) this.close(key, entry);
  }

  /** Open connections, for tests and metrics. */
  get size(): number {
    return this.pool.size;
  }

  closeIdle(now = Date.now()): void {
    for (const [key, entry] of this.pool) {
      if (entry.users === 0 && entry.client && now - entry.lastUsed >= SSH_IDLE_CLOSE_MS) this.close(key, entry);
    }
  }

  onModuleDestroy(): void {
    clearInterval(this.sweeper);
    for (const [key, entry] of this.pool) this.close(key, entry);
  }

  private close(key: string, entry: PooledConnection): void {
    if (this.pool.get(key) === entry) this.pool.delete(key);
    // A connection still opening is closed once it opens; calls already on it finish first
    // only in the sense that ending the client closes their channels.
    entry.connection.then(({ client }) => client.end(), () => undefined);
  }
}
