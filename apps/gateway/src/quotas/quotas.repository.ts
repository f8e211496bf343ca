import { Injectable } from '@nestjs/common';
import { ADVISORY_LOCK, PrismaService, prismaSqlTx, SqlTx } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { TenantUsage } from './quota-check';
import { parseStoredLimits, TenantLimits } from './tenant-limits';

export const RATE_WINDOW_SECONDS = 60;

/** The limits that are counted in Postgres (max_sandboxes is the executor's, at container creation). */
const ANY_COUNTED_LIMIT = Prisma.raw(`t.limits ?| array['max_sessions', 'max_concurrent_runs', 'runs_per_minute']`);

/** The tenant's limits and, when one of them is counted, what it uses now. */
export interface QuotaState {
  limits: TenantLimits;
  usage?: TenantUsage;
}

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
   * this one's rows are committed or rolled back. `work` gets the limits and the usage
   * read under the lock; repository calls inside it join the transaction.
   */
  withQuotaLock<T>(tenantId: string, work: (state: QuotaState) => Promise<T>): Promise<T> {
    return this.db.tenant(tenantId, async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${ADVISORY_LOCK.tenantQuota}::int, hashtext(${tenantId}))`;
      // A statement of its own after the lock's: a statement sees what was committed when
      // it began, so only one that begins after the lock is granted counts the previous
      // holder's rows.
      return work(await this.readState(prismaSqlTx(tx), tenantId));
    });
  }

  /**
   * withQuotaLock for work that is raw SQL (PrismaService.tenantSql), which gets the
   * transaction: the lock is taken in the round trip that begins it.
   */
  withQuotaLockSql<T>(tenantId: string, work: (state: QuotaState, sql: SqlTx) => Promise<T>): Promise<T> {
    return this.db.tenantSql(tenantId, async (sql) => work(await this.readState(sql, tenantId), sql), {
      advisoryLock: { classId: ADVISORY_LOCK.tenantQuota, name: tenantId },
    });
  }

  /** What the tenant uses now, in the transaction that holds its quota lock. */
  async usage(tenantId: string): Promise<TenantUsage> {
    return this.db.tenant(tenantId, (tx) => this.usageIn(prismaSqlTx(tx), tenantId));
  }

  /** usage() in the given transaction. */
  async usageIn(sql: SqlTx, tenantId: string): Promise<TenantUsage> {
    const state = await this.readState(sql, tenantId, true);
    if (!state.usage) throw new Error(`tenant ${tenantId} was not found`);
    return state.usage;
  }

  /**
   * The limits and (when one is counted, or `always`) the usage in one statement. The
   * counts are in CASE branches: Postgres runs an uncounted branch's subqueries not at all.
   */
  private async readState(sql: SqlTx, tenantId: string, always = false): Promise<QuotaState> {
    const counted = always ? Prisma.sql`true` : ANY_COUNTED_LIMIT;
    const window = Prisma.sql`runs WHERE tenant_id = ${tenantId} AND parent_run_id IS NULL AND created_at > clock_timestamp() - make_interval(secs => ${RATE_WINDOW_SECONDS})`;
    const [row] = await sql.query<{ limits: unknown; sessions: number | null; active_runs: number | null; recent_runs: number | null; reset_seconds: number | null }>(Prisma.sql`
      SELECT t.limits,
             CASE WHEN ${counted} THEN (SELECT count(*)::int FROM sessions WHERE tenant_id = ${tenantId} AND status = 'active') END AS sessions,
             CASE WHEN ${counted} THEN (SELECT count(*)::int FROM runs WHERE tenant_id = ${tenantId} AND parent_run_id IS NULL
                                          AND status IN ('queued', 'running', 'requires_approval')) END AS active_runs,
             CASE WHEN ${counted} THEN (SELECT count(*)::int FROM ${window}) END AS recent_runs,
             CASE WHEN ${counted} THEN (SELECT ceil(extract(epoch FROM min(created_at) + make_interval(secs => ${RATE_WINDOW_SECONDS}) - clock_timestamp()))::int
                                          FROM ${window}) END AS reset_seconds
        FROM tenants t WHERE t.id = ${tenantId}`);
    const limits = parseStoredLimits(row?.limits);
    if (!row || row.sessions === null || row.active_runs === null || row.recent_runs === null) return { limits };
    return {
      limits,
      usage: {
        sessions: Number(row.sessions),
        activeRuns: Number(row.active_runs),
        recentRuns: Number(row.recent_runs),
        windowResetSeconds: row.reset_seconds ?? RATE_WINDOW_SECONDS,
      },
    };
  }
}
