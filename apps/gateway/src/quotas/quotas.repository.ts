import { Injectable } from '@nestjs/common';
import { ADVISORY_LOCK, PrismaService } from '@app/persistence';
import { TenantUsage } from './quota-check';
import { parseStoredLimits, TenantLimits } from './tenant-limits';

export const RATE_WINDOW_SECONDS = 60;

/**
 * The counts behind a tenant's limits, read in the tenant's transaction. Everything is
 * counted in Postgres, so the limits hold across any number of gateway replicas.
 */
@Injectable()
export class QuotasRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * Runs `work` in one transaction of the tenant that holds the tenant's quota lock until
   * it commits: another request of the same tenant, on any replica, waits to count until
   * this one's rows are committed or rolled back. Repository calls inside `work` join it.
   */
  withQuotaLock<T>(tenantId: string, work: () => Promise<T>): Promise<T> {
    return this.db.tenant(tenantId, async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantQuota}::int, hashtext(${tenantId}))`;
      return work();
    });
  }

  async limits(tenantId: string): Promise<TenantLimits> {
    // Raw SQL: read under the tenant's quota lock, and an ORM statement costs a query compilation.
    const [row] = await this.db.tenant(tenantId, (tx) => tx.$queryRaw<Array<{ limits: unknown }>>`SELECT limits FROM tenants WHERE id = ${tenantId}`);
    return parseStoredLimits(row?.limits);
  }

  async usage(tenantId: string): Promise<TenantUsage> {
    const [row] = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<Array<{ sessions: bigint; active_runs: bigint; recent_runs: bigint; reset_seconds: number | null }>>`
        SELECT
          (SELECT count(*) FROM sessions WHERE tenant_id = ${tenantId} AND status = 'active') AS sessions,
          (SELECT count(*) FROM runs WHERE tenant_id = ${tenantId} AND parent_run_id IS NULL
             AND status IN ('queued', 'running', 'requires_approval')) AS active_runs,
          w.recent_runs,
          ceil(extract(epoch FROM w.oldest + make_interval(secs => ${RATE_WINDOW_SECONDS}) - clock_timestamp()))::int AS reset_seconds
        FROM (SELECT count(*) AS recent_runs, min(created_at) AS oldest FROM runs
               WHERE tenant_id = ${tenantId} AND parent_run_id IS NULL AND created_at > clock_timestamp() - make_interval(secs => ${RATE_WINDOW_SECONDS})) w`,
    );
    return {
      sessions: Number(row.sessions),
      activeRuns: Number(row.active_runs),
      recentRuns: Number(row.recent_runs),
      windowResetSeconds: row.reset_seconds ?? RATE_WINDOW_SECONDS,
    };
  }
}
