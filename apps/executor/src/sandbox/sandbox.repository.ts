import { ADVISORY_LOCK, PrismaService, Tx } from '@app/persistence';
import { Prisma } from '@prisma/client';
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
   * each round trip is a noticeable share of the whole: two statements besides the
   * transaction's own (the session, its sandbox row and the tenant's limit read while the
   * tenant's sandbox lock is taken; then the row written if the tenant is under its limit).
   */
  async bindIfNew(record: SandboxRecord): Promise<{ live: boolean; bound: boolean; record: SandboxRecord | null }> {
    return this.db.tenant(record.tenantId, async (tx) => {
      const [found] = await tx.$queryRaw<Array<SandboxRow & { sessionLive: boolean; limits: unknown }>>`
        SELECT s.id IS NOT NULL AS "sessionLive", b.session_id AS "sessionId", b.tenant_id AS "tenantId",
               b.executor_id AS "executorId", b.backend, b.container_id AS "containerId", b.volume, b.state,
               l.limits
          FROM (SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantSandboxes}::int, hashtext(${record.tenantId})) AS locked) AS lock
          LEFT JOIN LATERAL (SELECT limits FROM tenants WHERE id = ${record.tenantId}) AS l ON TRUE
          LEFT JOIN sessions s ON s.id = ${record.sessionId} AND s.tenant_id = ${record.tenantId} AND s.status = 'active'
          LEFT JOIN sandboxes b ON b.session_id = s.id`;
      if (!found?.sessionLive) return { live: false, bound: false, record: null };
      const existing = found.sessionId ? toRecord(found) : null;
      if (existing && existing.state !== 'removed') return { live: true, bound: false, record: existing };
      await upsertUnderLimit(tx, record, maxSandboxes(found.limits));
      return { live: true, bound: true, record: null };
    });
  }

  /**
   * Saves the record as `creating` if the tenant is under its max_sandboxes limit; throws
   * SandboxQuotaError when it is not.
   */
  async claim(record: SandboxRecord): Promise<void> {
    await this.db.tenant(record.tenantId, async (tx) => {
      const [{ limits }] = await tx.$queryRaw<Array<{ limits: unknown }>>`
        SELECT l.limits
          FROM (SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantSandboxes}::int, hashtext(${record.tenantId})) AS locked) AS lock
          LEFT JOIN LATERAL (SELECT limits FROM tenants WHERE id = ${record.tenantId}) AS l ON TRUE`;
      await upsertUnderLimit(tx, { ...record, state: 'creating' }, maxSandboxes(limits));
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

type SandboxRow = Parameters<typeof toRecord>[0];

/**
 * Writes the session's sandbox row, in a statement of its own after the tenant's sandbox
 * lock was taken (so its snapshot sees every sandbox another executor recorded before),
 * and only while the tenant's other live sandboxes are fewer than `max`: the count and
 * the write are one statement. Throws SandboxQuotaError, which rolls the transaction back,
 * when the tenant is at its limit.
 */
async function upsertUnderLimit(tx: Tx, record: SandboxRecord, max: number | undefined): Promise<void> {
  const { sessionId, tenantId, executorId, backend, containerId, volume, state } = record;
  const underLimit =
    max === undefined
      ? Prisma.sql`TRUE`
      : Prisma.sql`(SELECT count(*) FROM sandboxes
                     WHERE tenant_id = ${tenantId} AND state IN (${Prisma.join(LIVE_SANDBOX_STATES)}) AND session_id <> ${sessionId}) < ${max}`;
  const written = await tx.$executeRaw`
    INSERT INTO sandboxes (session_id, tenant_id, executor_id, backend, container_id, volume, state, error, last_used_at, updated_at)
    SELECT ${sessionId}, ${tenantId}, ${executorId}, ${backend}, ${containerId}, ${volume}, ${state}, NULL, now(), now()
     WHERE ${underLimit}
    ON CONFLICT (session_id) DO UPDATE
      SET executor_id = EXCLUDED.executor_id, backend = EXCLUDED.backend, container_id = EXCLUDED.container_id,
          volume = EXCLUDED.volume, state = EXCLUDED.state, error = NULL, last_used_at = now(), updated_at = now()`;
  if (written === 0 && max !== undefined) throw new SandboxQuotaError(max);
}
