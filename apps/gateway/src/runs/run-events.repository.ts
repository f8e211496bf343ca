import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { appendEventsTx, lockRun, NewEvent } from './run-tx';
import { isTerminal, RunStatus } from './run-status';

export interface RunEventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** What an event stream reads at each wake-up. */
export interface RunEventsRead {
  status: RunStatus;
  events: RunEventView[];
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

  /**
   * The run's status and its events after `afterSeq` (up to `limit`), as of one moment:
   * a terminal status comes with every event up to the terminal one. Null when the tenant
   * has no such run. One statement in one round trip: every live stream reads here after
   * each event.
   */
  async read(tenantId: string, runId: string, afterSeq: number, limit = 500): Promise<RunEventsRead | null> {
    const rows = await this.db.tenantRead<{ status: string; seq: number | null; type: string; data: Record<string, unknown>; created_at: Date }>(
      tenantId,
      Prisma.sql`
      SELECT r.status, e.seq, e.type, e.data, e.created_at
        FROM runs r
        LEFT JOIN LATERAL (SELECT seq, type, data, created_at FROM run_events
                            WHERE run_id = r.id AND tenant_id = r.tenant_id AND seq > ${afterSeq}::bigint ORDER BY seq ASC LIMIT ${limit}::int) e ON true
       WHERE r.id = ${runId} AND r.tenant_id = ${tenantId}
       ORDER BY e.seq ASC`,
    );
    if (rows.length === 0) return null;
    const events = rows.filter((r) => r.seq !== null).map((r) => ({ seq: r.seq as number, type: r.type, data: r.data, createdAt: r.created_at }));
    return { status: rows[0].status as RunStatus, events };
  }
}
