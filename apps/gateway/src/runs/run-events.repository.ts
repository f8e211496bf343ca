import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { appendEventsTx, lockRun, NewEvent } from './run-tx';
import { isTerminal } from './run-status';

export interface RunEventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** A run's events, numbered without gaps under the run's lock. */
@Injectable()
export class RunEventsRepository {
  constructor(private readonly db: PrismaService) {}

  /** Appends events unless the run has already ended (its terminal event is always last). */
  async appendEvents(tenantId: string, runId: string, events: NewEvent[]): Promise<number[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || isTerminal(locked.status)) return [];
      return appendEventsTx(tx, tenantId, runId, events);
    });
  }

  async eventsAfter(tenantId: string, runId: string, afterSeq: number, limit = 500): Promise<RunEventView[]> {
    // Raw SQL: every live stream reads here after each event, and an ORM statement costs a
    // query compilation in the gateway.
    const rows = await this.db.tenantSql(tenantId, (sql) => sql.query<{ seq: number; type: string; data: Record<string, unknown>; created_at: Date }>(Prisma.sql`
      SELECT seq, type, data, created_at FROM run_events
       WHERE run_id = ${runId} AND tenant_id = ${tenantId} AND seq > ${afterSeq}::int ORDER BY seq ASC LIMIT ${limit}::int`));
    return rows.map((r) => ({ seq: r.seq, type: r.type, data: r.data, createdAt: r.created_at }));
  }
}
