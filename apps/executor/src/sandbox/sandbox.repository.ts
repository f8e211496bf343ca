import { ADVISORY_LOCK, PrismaService, Tx } from '@app/persistence';
import { LIVE_SANDBOX_STATES, maxSandboxes, SandboxQuotaError } from './sandbox-quota';
import type { SandboxBackend } from './sandbox-runtime';

export type SandboxState = 'creating' | 'ready' | 'stopped' | 'removed' | 'failed';

export interface SandboxRecord {
  sessionId: string;
  tenantId: string;
  executorId: string;
  backend: SandboxBackend;
  containerId: string | null;
  /** The workspace: a Docker volume name, or a directory for the local backend. */
  volume: string | null;
  state: SandboxState;
}

/**
 * The executor's rows in `sandboxes`, plus the questions it asks about sessions. The row
 * is the durable link between a session and its container: Docker labels cannot change
 * after creation, so a warm-pool container handed to a session is bound to it only here
 * (and in the executor's memory).
 */
export class SandboxRepository {
  constructor(private readonly db: PrismaService) {}

  /** Whether the session is live for this tenant, and its sandbox row if it has one: one query. */
  async findForCall(tenantId: string, sessionId: string): Promise<{ live: boolean; record: SandboxRecord | null }> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.session.findFirst({ where: { id: sessionId, tenantId, status: 'active' }, select: { id: true, sandbox: true } }),
    );
    return { live: row !== null, record: row?.sandbox ? toRecord(row.sandbox) : null };
  }

  /**
   * For a session's first sandbox: in one transaction, checks that the session is live and
   * has no sandbox yet, and if so records `record` as its sandbox. The warm-pool path, where
   * a second round trip would be a noticeable share of the whole.
   */
  async bindIfNew(record: SandboxRecord): Promise<{ live: boolean; bound: boolean; record: SandboxRecord | null }> {
    return this.db.tenant(record.tenantId, async (tx) => {
      const session = await tx.session.findFirst({
        where: { id: record.sessionId, tenantId: record.tenantId, status: 'active' },
        select: { id: true, sandbox: true },
      });
      if (!session) return { live: false, bound: false, record: null };
      const existing = session.sandbox ? toRecord(session.sandbox) : null;
      if (existing && existing.state !== 'removed') return { live: true, bound: false, record: existing };
      await assertUnderSandboxLimit(tx, record.tenantId, record.sessionId);
      const data = { ...rowData(record), error: null, lastUsedAt: new Date() };
      await tx.sandbox.upsert({
        where: { sessionId: record.sessionId },
        create: { sessionId: record.sessionId, tenantId: record.tenantId, ...data },
        update: data,
      });
      return { live: true, bound: true, record: null };
    });
  }

  /**
   * Saves the record as `creating` if the tenant is under its max_sandboxes limit; throws
   * SandboxQuotaError when it is not.
   */
  async claim(record: SandboxRecord): Promise<void> {
    await this.db.tenant(record.tenantId, async (tx) => {
      await assertUnderSandboxLimit(tx, record.tenantId, record.sessionId);
      const data = { ...rowData({ ...record, state: 'creating' }), error: null, lastUsedAt: new Date() };
      await tx.sandbox.upsert({
        where: { sessionId: record.sessionId },
        create: { sessionId: record.sessionId, tenantId: record.tenantId, ...data },
        update: data,
      });
    });
  }

  async find(tenantId: string, sessionId: string): Promise<SandboxRecord | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.sandbox.findFirst({ where: { sessionId, tenantId } }));
    return row ? toRecord(row) : null;
  }

  async save(record: SandboxRecord & { error?: string | null }): Promise<void> {
    const data = { ...rowData(record), error: record.error ?? null, lastUsedAt: new Date() };
    await this.db.tenant(record.tenantId, (tx) =>
      tx.sandbox.upsert({
        where: { sessionId: record.sessionId },
        create: { sessionId: record.sessionId, tenantId: record.tenantId, ...data },
        update: data,
      }),
    );
  }

  async setState(tenantId: string, sessionId: string, state: SandboxState, error?: string): Promise<void> {
    await this.db.tenant(tenantId, (tx) =>
      tx.sandbox.updateMany({ where: { sessionId, tenantId }, data: { state, error: error ?? null } }),
    );
  }

  /** The container is gone; `volume` is the workspace kept for the next one, or null. */
  async markGone(tenantId: string, sessionId: string, state: 'stopped' | 'removed' | 'failed', volume: string | null, error?: string): Promise<void> {
    await this.db.tenant(tenantId, (tx) =>
      tx.sandbox.updateMany({
        where: { sessionId, tenantId },
        data: { state, containerId: null, volume, error: error ?? null },
      }),
    );
  }

  /** This executor's sandboxes whose session is live (deployment-wide: for recovery and the sweep). */
  async liveRowsOf(executorId: string): Promise<SandboxRecord[]> {
    const rows = await this.db.system((tx) =>
      tx.sandbox.findMany({ where: { executorId, state: { not: 'removed' }, session: { status: 'active' } } }),
    );
    return rows.map(toRecord);
  }

  /** Rows of sessions deleted while no executor answered, once the sweep removed their sandbox. */
  async markRemovedWhereSessionGone(executorId: string): Promise<number> {
    const res = await this.db.system((tx) =>
      tx.sandbox.updateMany({
        where: { executorId, state: { not: 'removed' }, session: { status: { not: 'active' } } },
        data: { state: 'removed', containerId: null, volume: null },
      }),
    );
    return res.count;
  }
}

function rowData(record: SandboxRecord) {
  const { executorId, backend, containerId, volume, state } = record;
  return { executorId, backend, containerId, volume, state };
}

function toRecord(row: {
  sessionId: string;
  tenantId: string;
  executorId: string;
  backend: string;
  containerId: string | null;
  volume: string | null;
  state: string;
}): SandboxRecord {
  return {
    sessionId: row.sessionId,
    tenantId: row.tenantId,
    executorId: row.executorId,
    backend: row.backend === 'local' ? 'local' : 'docker',
    containerId: row.containerId,
    volume: row.volume,
    state: row.state as SandboxState,
  };
}

/**
 * Counts the tenant's other live sandboxes (on any executor) under a per-tenant lock held to
 * the end of the transaction, so two executors cannot both take the last slot.
 */
async function assertUnderSandboxLimit(tx: Tx, tenantId: string, sessionId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantSandboxes}::int, hashtext(${tenantId}))`;
  const tenant = await tx.tenant.findFirst({ where: { id: tenantId }, select: { limits: true } });
  const max = maxSandboxes(tenant?.limits);
  if (max === undefined) return;
  const live = await tx.sandbox.count({ where: { tenantId, state: { in: LIVE_SANDBOX_STATES }, sessionId: { not: sessionId } } });
  if (live >= max) throw new SandboxQuotaError(max);
}
