import { INestApplicationContext } from '@nestjs/common';
import { loadConfig, RunboxConfig } from '@app/config';
import { ToolResult } from '@app/contracts';
import { createTestDatabase, queryDatabase, removeExecutorResources, startNats, startOrUndo, TestDatabase, TestNats, testServiceEnv } from '@app/testing';
import { randomBytes } from 'node:crypto';
import { startExecutor } from '../../src/executor.app';
import { SandboxBackend } from '../../src/sandbox/sandbox-runtime';
import { SandboxService } from '../../src/sandbox/sandbox.service';

export interface TestSession {
  tenantId: string;
  sessionId: string;
}

export type SandboxRow = {
  state: string;
  container_id: string | null;
  volume: string | null;
  executor_id: string;
  tenant_id: string;
  backend: string;
};

/**
 * One executor (the production module) on its own database and NATS server, without a
 * gateway: for tests of the sandbox lifecycle that need to reach inside the executor.
 * Sessions are written straight into the database. `stop()` removes every container and
 * volume carrying the executor's label.
 */
export class ExecutorHarness {
  readonly executorId = `itest-${randomBytes(5).toString('hex')}`;
  readonly tenantId = `ten_${randomBytes(8).toString('hex')}`;
  config!: RunboxConfig;
  db!: TestDatabase;
  nats!: TestNats;
  private app?: INestApplicationContext;

  constructor(private readonly env: Record<string, string> = {}) {}

  /** Starts everything; if any part fails, stops what did start before rethrowing. */
  start(): Promise<this> {
    return startOrUndo(() => this.startParts(), () => this.stop());
  }

  private async startParts(): Promise<this> {
    [this.db, this.nats] = await Promise.all([createTestDatabase(), startNats()]);
    this.config = loadConfig({ ...testServiceEnv(this.db, this.nats, this.executorId), ...this.env });
    await this.sql('INSERT INTO tenants (id, name) VALUES ($1, $2)', [this.tenantId, this.tenantId]);
    await this.startExecutor();
    return this;
  }

  /** Starts the executor; with the same id as before, it is "the executor after a restart". */
  async startExecutor(): Promise<void> {
    this.app = await startExecutor(this.config, false);
  }

  async stopExecutor(): Promise<void> {
    await this.app?.close();
    this.app = undefined;
  }

  get<T>(token: new (...args: never[]) => T): T {
    if (!this.app) throw new Error('the executor is not running');
    return this.app.get(token);
  }

  async newSession(): Promise<TestSession> {
    const sessionId = `ses_${randomBytes(10).toString('hex')}`;
    await this.sql('INSERT INTO sessions (id, tenant_id) VALUES ($1, $2)', [sessionId, this.tenantId]);
    return { tenantId: this.tenantId, sessionId };
  }

  /** What the gateway does on DELETE before it asks the executor to release the sandbox. */
  async markSessionDeleted(sessionId: string): Promise<void> {
    await this.sql(`UPDATE sessions SET status = 'deleted', deleted_at = now() WHERE id = $1`, [sessionId]);
  }

  /**
   * The product's own cleanup, and nothing else: every session still open is deleted as the
   * gateway's DELETE does it (marked deleted, then released), and the executor stops (which
   * empties its warm pool). Whatever still carries the executor's label afterwards leaked;
   * `stop()` force-removes it later regardless, so count before calling that.
   */
  async deleteSessionsAndStopExecutor(): Promise<void> {
    const open = await this.sql<{ id: string }>(`SELECT id FROM sessions WHERE tenant_id = $1 AND status <> 'deleted'`, [this.tenantId]);
    for (const { id } of open) {
      await this.markSessionDeleted(id);
      await this.get(SandboxService).release(this.tenantId, id);
    }
    await this.stopExecutor();
  }

  async sandboxRow(sessionId: string): Promise<SandboxRow | undefined> {
    const rows = await this.sql<SandboxRow>(
      'SELECT state, container_id, volume, executor_id, tenant_id, backend FROM sandboxes WHERE session_id = $1',
      [sessionId],
    );
    return rows[0];
  }

  /** One terminal call through the executor's SandboxService, as its NATS handler makes it. */
  terminal(session: TestSession, command: string, extra: Record<string, unknown> = {}, backend: SandboxBackend = 'docker'): Promise<ToolResult> {
    return this.get(SandboxService).call({ ...session, backend }, 'terminal', { command, max_output_chars: 30_000, ...extra }, 60_000);
  }

  sql<T extends Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    return queryDatabase<T>(this.db.url, text, params);
  }

  async stop(): Promise<void> {
    await this.stopExecutor().catch(() => undefined);
    await removeExecutorResources(this.executorId);
    await this.nats?.stop();
    await this.db?.drop();
  }
}
