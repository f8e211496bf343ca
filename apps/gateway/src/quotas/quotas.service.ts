import { Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { SqlTx } from '@app/persistence';
import { exceededLimit, roomForOneMore, TenantUsage } from './quota-check';
import { QuotasRepository, QuotaState } from './quotas.repository';
import { TenantLimits } from './tenant-limits';

/**
 * Enforces a tenant's limits on sessions and runs (max_sandboxes is the executor's, at
 * container creation). Over a limit the answer is 429 with Retry-After naming the limit,
 * and nothing of the request is kept.
 */
@Injectable()
export class QuotasService {
  constructor(private readonly quotas: QuotasRepository) {}

  /**
   * Runs `create` (which writes sessions and/or runs through the repositories) atomically
   * with the quota check: the counts are taken before and after it in one transaction under
   * the tenant's lock, so two requests racing for the last slot cannot both get it, and a
   * refused request's rows are rolled back with everything else it wrote. The limits and
   * the count before are one statement; far from every limit, the count after is not
   * needed (roomForOneMore) and is not taken.
   */
  admit<T>(tenantId: string, create: () => Promise<T>): Promise<T> {
    return this.quotas.withQuotaLock(tenantId, (state) => this.admitUnderLock(state, create, () => this.quotas.usage(tenantId)));
  }

  /** admit() for a `create` that is raw SQL (PrismaService.tenantSql): it gets the transaction. */
  admitSql<T>(tenantId: string, create: (sql: SqlTx) => Promise<T>): Promise<T> {
    return this.quotas.withQuotaLockSql(tenantId, (state, sql) =>
      this.admitUnderLock(state, () => create(sql), () => this.quotas.usageIn(sql, tenantId)),
    );
  }

  private async admitUnderLock<T>({ limits, usage: before }: QuotaState, create: () => Promise<T>, usageNow: () => Promise<TenantUsage>): Promise<T> {
    if (!hasCountedLimit(limits) || !before) return create();
    const result = await create();
    if (roomForOneMore(limits, before)) return result;
    const exceeded = exceededLimit(limits, before, await usageNow());
    if (exceeded) {
      const code = exceeded.limit === 'runs_per_minute' ? ErrorCode.RateLimited : ErrorCode.QuotaExceeded;
      throw new AppError(code, exceeded.message, { limit: exceeded.limit, max: exceeded.max, current: exceeded.current }, exceeded.retryAfterSeconds);
    }
    return result;
  }
}

function hasCountedLimit(limits: TenantLimits): boolean {
  return limits.max_sessions !== undefined || limits.max_concurrent_runs !== undefined || limits.runs_per_minute !== undefined;
}
