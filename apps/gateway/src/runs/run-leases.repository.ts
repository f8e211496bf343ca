import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { heldByAnother, lockRunSql } from './run-tx';
import { isTerminal, RunStatus } from './run-status';
import { RUN_COLUMNS, RunSqlRow, RunView, toRun } from './runs.repository';
import { WorkerHolds } from './worker-share';

export type ClaimOutcome =
  | { kind: 'claimed'; run: RunView; recovered: boolean; recoveries: number }
  | { kind: 'finished' }
  | { kind: 'held'; retryInMs: number };

/** Which worker executes a run: its claim (a lease renewed by heartbeats), and when it was last put on the queue. */
@Injectable()
export class RunLeasesRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * Takes the run for this worker. A live claim of another worker is respected (the caller
   * retries after it would lapse); a lapsed one is taken over and counted as a recovery.
   *
   * A queued run that nobody holds is only read: its start takes the lease in the start's
   * own transaction (RunsRepository.start, with `lease`), which checks again under the
   * run's lock, so picking up a new run costs one read instead of a transaction and its
   * commit. Two workers that read it at once both try to start it; one does, the other
   * finds it started and lets it be.
   */
  async claim(tenantId: string, runId: string, owner: string, leaseMs: number): Promise<ClaimOutcome> {
    const [seen] = await this.db.tenantRead<RunSqlRow & { leaseOwner: string | null; leaseExpiresAt: Date | null; now: Date }>(tenantId, Prisma.sql`
      SELECT ${RUN_COLUMNS}, lease_owner AS "leaseOwner", lease_expires_at AS "leaseExpiresAt", now() AS now
        FROM runs WHERE id = ${runId} AND tenant_id = ${tenantId}`);
    if (!seen || isTerminal(seen.status as RunStatus)) return { kind: 'finished' };
    if (seen.status === 'queued' && !heldByAnother(seen, owner)) return { kind: 'claimed', run: toRun(seen), recovered: false, recoveries: seen.recoveries };
    return this.db.tenantSql(tenantId, async (sql) => {
      const locked = await lockRunSql(sql, tenantId, runId);
      if (!locked || isTerminal(locked.status)) return { kind: 'finished' as const };
      if (heldByAnother(locked, owner) && locked.leaseExpiresAt) {
        return { kind: 'held' as const, retryInMs: locked.leaseExpiresAt.getTime() - locked.now.getTime() + 500 };
      }
      // A lapsed claim of another worker on a running run: that worker stopped.
      const recovered = locked.leaseOwner !== null && locked.leaseOwner !== owner && locked.status === 'running';
      const [row] = await sql.query<RunSqlRow>(Prisma.sql`
        UPDATE runs SET lease_owner = ${owner}, lease_expires_at = now() + ${leaseMs}::int * interval '1 millisecond',
               recoveries = recoveries + ${recovered ? 1 : 0}::int
         WHERE id = ${runId} AND tenant_id = ${tenantId}
        RETURNING ${RUN_COLUMNS}`);
      return { kind: 'claimed' as const, run: toRun(row), recovered, recoveries: row.recoveries };
    });
  }

  /**
   * Extends this worker's claim; returns the run's status, or null when the claim was lost.
   * A queued run that nobody holds (read by `claim`, its start still to come, say while the
   * tenant's tools are listed) is taken here.
   */
  async renewLease(tenantId: string, runId: string, owner: string, leaseMs: number): Promise<RunStatus | null> {
    const rows = await this.db.tenantSql(tenantId, (sql) => sql.query<{ status: string }>(Prisma.sql`
      UPDATE runs SET lease_owner = ${owner}, lease_expires_at = now() + ${leaseMs}::int * interval '1 millisecond'
       WHERE id = ${runId} AND tenant_id = ${tenantId}
         AND (lease_owner = ${owner} OR (status = 'queued' AND (lease_owner IS NULL OR lease_expires_at < now())))
       RETURNING status`));
    return (rows[0]?.status as RunStatus | undefined) ?? null;
  }

  async releaseLease(tenantId: string, runId: string, owner: string): Promise<void> {
    await this.db.tenantSql(tenantId, (sql) => sql.query(Prisma.sql`
      UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = ${runId} AND tenant_id = ${tenantId} AND lease_owner = ${owner}`));
  }

  /** Notes that the run was put on the queue now; with `unlessSince`, only if nobody else did since then. */
  async markDispatched(tenantId: string, runId: string, unlessSince?: Date | null): Promise<boolean> {
    const res = await this.db.tenant(tenantId, (tx) =>
      tx.run.updateMany({
        where: { id: runId, tenantId, ...(unlessSince !== undefined ? { dispatchedAt: unlessSince } : {}) },
        data: { dispatchedAt: new Date() },
      }),
    );
    return res.count > 0;
  }

  // --- Sharing run workers between tenants: deployment-wide reads of the live leases ---

  /**
   * Top-level runs the workers of other gateway replicas hold now (a live lease), per
   * tenant, and how many replicas those are. A lease owner is `<replica>/<claim>`; the
   * caller counts its own replica's runs itself. Sub-runs are left out: they run inside
   * their parent's worker.
   */
  async workerHoldsElsewhere(replica: string): Promise<WorkerHolds> {
    const rows = await this.db.systemSql<{ tenant_id: string; held: number; replicas: number }>(Prisma.sql`
      WITH live AS (
        SELECT tenant_id, split_part(lease_owner, '/', 1) AS replica FROM runs
         WHERE status IN ('queued', 'running', 'requires_approval') AND parent_run_id IS NULL
           AND lease_owner IS NOT NULL AND lease_expires_at > now())
      SELECT tenant_id, count(*)::int AS held, (SELECT count(DISTINCT replica) FROM live WHERE replica <> ${replica})::int AS replicas
        FROM live WHERE replica <> ${replica} GROUP BY tenant_id`);
    return { byTenant: new Map(rows.map((r) => [r.tenant_id, r.held])), replicas: rows[0]?.replicas ?? 0 };
  }
}
