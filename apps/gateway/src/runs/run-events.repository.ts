import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
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
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.runEvent.findMany({ where: { runId, tenantId, seq: { gt: afterSeq } }, orderBy: { seq: 'asc' }, take: limit }),
    );
    return rows.map((r) => ({ seq: r.seq, type: r.type, data: r.data as Record<string, unknown>, createdAt: r.createdAt }));
  }
}
