import { ADVISORY_LOCK, PrismaService } from '@app/persistence';
import { LIVE_SANDBOX_STATES, maxSandboxes, SandboxQuotaError } from './sandbox-quota';

export type SandboxState = 'creating' | 'ready' | 'stopped' | 'removed' | 'failed';

export interface SandboxRecord {
  sessionId: string;
  tenantId: string;
  executorId: string;
  containerId: string | null;
  volume: string | null;
  state: SandboxState;
}

/** The executor's rows in `sandboxes`, plus the one question it asks about sessions. */
export class SandboxRepository {
  constructor(private readonly db: PrismaService) {}

  /** True when the session exists, is live and belongs to the tenant. */
  async sessionIsLive(tenantId: string, sessionId: string): Promise<boolean> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.session.findFirst({ where: { id: sessionId, tenantId, status: 'active' }, select: { id: true } }),
    );
    return row !== null;
  }

  async find(tenantId: string, sessionId: string): Promise<SandboxRecord | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.sandbox.findFirst({ where: { sessionId, tenantId } }));
    return row ? toRecord(row) : null;
  }

  async save(record: SandboxRecord & { error?: string | null }): Promise<void> {
    const data = {
      executorId: record.executorId,
      containerId: record.containerId,
      volume: record.volume,
      state: record.state,
      error: record.error ?? null,
      lastUsedAt: new Date(),
    };
    await this.db.tenant(record.tenantId, (tx) =>
      tx.sandbox.upsert({
        where: { sessionId: record.sessionId },
        create: { sessionId: record.sessionId, tenantId: record.tenantId, ...data },
        update: data,
      }),
    );
  }

  /**
   * Saves the record as `creating` if the tenant is under its max_sandboxes limit, counting
   * its other live sandboxes (on any executor) under a per-tenant lock, so two executors
   * cannot both take the last slot. Throws SandboxQuotaError when it is not.
   */
  async claim(record: SandboxRecord): Promise<void> {
    const { tenantId, sessionId } = record;
    await this.db.tenant(tenantId, async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantSandboxes}::int, hashtext(${tenantId}))`;
      const tenant = await tx.tenant.findFirst({ where: { id: tenantId }, select: { limits: true } });
      const max = maxSandboxes(tenant?.limits);
      if (max !== undefined) {
        const live = await tx.sandbox.count({ where: { tenantId, state: { in: LIVE_SANDBOX_STATES }, sessionId: { not: sessionId } } });
        if (live >= max) throw new SandboxQuotaError(max);
      }
      await this.save({ ...record, state: 'creating' });
    });
  }

  async setState(tenantId: string, sessionId: string, state: SandboxState, error?: string): Promise<void> {
    await this.db.tenant(tenantId, (tx) =>
      tx.sandbox.updateMany({ where: { sessionId, tenantId }, data: { state, error: error ?? null } }),
    );
  }

  /** Sessions that still want their sandbox: live, and not deleted. Used by the orphan sweep. */
  async liveSessionIds(sessionIds: string[]): Promise<Set<string>> {
    if (sessionIds.length === 0) return new Set();
    const rows = await this.db.system((tx) =>
      tx.session.findMany({ where: { id: { in: sessionIds }, status: 'active' }, select: { id: true } }),
    );
    return new Set(rows.map((r) => r.id));
  }
}

function toRecord(row: {
  sessionId: string;
  tenantId: string;
  executorId: string;
  containerId: string | null;
  volume: string | null;
  state: string;
}): SandboxRecord {
  return {
    sessionId: row.sessionId,
    tenantId: row.tenantId,
    executorId: row.executorId,
    containerId: row.containerId,
    volume: row.volume,
    state: row.state as SandboxState,
  };
}
