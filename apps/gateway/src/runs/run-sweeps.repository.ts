import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { ACTIVE_STATUSES } from './run-status';
import { runsAheadSql } from './runs-ahead';

export interface StrandedRun {
  tenantId: string;
  id: string;
  dispatchedAt: Date | null;
}

/** The runs that go on ahead of the swept run `r`, by the start's rule. */
const RUNS_AHEAD_OF_R = runsAheadSql('e', { tenantId: Prisma.raw('r.tenant_id'), sessionId: Prisma.raw('r.session_id'), id: Prisma.raw('r.id'), createdAt: Prisma.raw('r.created_at') });

/** Deployment-wide sweeps (as runbox_system, across tenants) for work nobody else will notice. */
@Injectable()
export class RunSweepsRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * Deployment-wide sweep: runs nobody is working on that should be. Queued and running
   * runs without a live claim that were not put on the queue recently (the queue message
   * was lost, or the worker died after taking it), and runs waiting for approval whose
   * approvals have all been decided.
   *
   * A queued top-level run behind an earlier run of its session that has not ended is not
   * stranded: it waits by design (`on_busy: enqueue`), and its start would only find it
   * still waiting. It is put on the queue when the run before it ends; if that message is
   * lost, the sweep finds it then, as the earliest of its session (runsAheadSql: the rule
   * the start applies).
   */
  async stranded(idleMs: number, limit = 100): Promise<StrandedRun[]> {
    const rows = await this.db.system((tx) => tx.$queryRaw<Array<{ id: string; tenant_id: string; dispatched_at: Date | null }>>`
      SELECT r.id, r.tenant_id, r.dispatched_at FROM runs r
       WHERE r.status IN ('queued', 'running', 'requires_approval')
         AND (r.lease_expires_at IS NULL OR r.lease_expires_at < now())
         AND (r.dispatched_at IS NULL OR r.dispatched_at < now() - ${idleMs} * interval '1 millisecond')
         AND (r.status <> 'requires_approval' OR NOT EXISTS (
               SELECT 1 FROM tool_calls c WHERE c.run_id = r.id AND c.status = 'awaiting_approval'))
         AND (r.status <> 'queued' OR r.parent_run_id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM runs e WHERE ${RUNS_AHEAD_OF_R}))
       ORDER BY r.dispatched_at NULLS FIRST
       LIMIT ${limit}`);
    return rows.map((r) => ({ tenantId: r.tenant_id, id: r.id, dispatchedAt: r.dispatched_at }));
  }

  /** Runs of the whole deployment not yet ended, by status (every active status, zero included). */
  async countActiveByStatus(): Promise<Record<string, number>> {
    const rows = await this.db.system((tx) => tx.$queryRaw<Array<{ status: string; runs: number }>>`
      SELECT status, count(*)::int AS runs FROM runs WHERE status IN ('queued', 'running', 'requires_approval') GROUP BY status`);
    const counts: Record<string, number> = Object.fromEntries(ACTIVE_STATUSES.map((s) => [s, 0]));
    for (const row of rows) counts[row.status] = row.runs;
    return counts;
  }

  /** Deployment-wide sweep: approvals still undecided past their deadline. */
  async expiredApprovals(limit = 100): Promise<Array<{ tenantId: string; runId: string; callId: string }>> {
    const rows = await this.db.system((tx) =>
      tx.toolCall.findMany({
        where: { status: 'awaiting_approval', expiresAt: { lt: new Date() } },
        select: { tenantId: true, runId: true, callId: true },
        take: limit,
      }),
    );
    return rows;
  }
}
