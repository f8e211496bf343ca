import { Injectable } from '@nestjs/common';
import { newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { RunOptions } from './run-options';
import { appendEventsTx, lockRun, NewEvent } from './run-tx';
import { isTerminal } from './run-status';
import { RunView, toRun } from './runs.repository';

/** A sub-run for one delegate_task call of `parent`. */
export interface NewSubRun {
  parent: Pick<RunView, 'id' | 'sessionId' | 'depth' | 'requestId'>;
  parentCallId: string;
  input: string;
  options: RunOptions;
  /** Events for the parent, written with the sub-run (e.g. subrun.started). */
  parentEvents: (subRunId: string) => NewEvent[];
}

export type SubRunOutcome =
  | { kind: 'created'; run: RunView; parentSeqs: number[] }
  | { kind: 'existing'; run: RunView }
  | { kind: 'parent_ended' };

/** Sub-runs (delegate_task): one per call, and their parents held while they wait for a person. */
@Injectable()
export class SubRunsRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * The sub-run of the parent's call `parentCallId`: the one made earlier (a parent resumed
   * after a crash picks up its sub-run instead of starting a second), else a new one,
   * queued in the parent's session. Nothing is made once the parent has ended.
   */
  async createSubRun(tenantId: string, input: NewSubRun): Promise<SubRunOutcome> {
    return this.db.tenant(tenantId, async (tx): Promise<SubRunOutcome> => {
      const parent = await lockRun(tx, tenantId, input.parent.id);
      if (!parent || isTerminal(parent.status)) return { kind: 'parent_ended' };
      const existing = await tx.run.findFirst({ where: { tenantId, parentRunId: input.parent.id, parentCallId: input.parentCallId } });
      if (existing) return { kind: 'existing', run: toRun(existing) };
      const row = await tx.run.create({
        data: {
          id: newId('run'),
          tenantId,
          sessionId: input.parent.sessionId,
          parentRunId: input.parent.id,
          parentCallId: input.parentCallId,
          depth: input.parent.depth + 1,
          status: 'queued',
          input: input.input,
          options: input.options as Prisma.InputJsonValue,
          // A sub-run is part of the request that made its parent.
          requestId: input.parent.requestId,
          dispatchedAt: new Date(),
        },
      });
      await appendEventsTx(tx, tenantId, row.id, [
        { type: 'run.queued', data: { session_id: row.sessionId, parent_run_id: input.parent.id, parent_tool_call_id: input.parentCallId } },
      ]);
      const parentSeqs = await appendEventsTx(tx, tenantId, input.parent.id, input.parentEvents(row.id));
      return { kind: 'created', run: toRun(row), parentSeqs };
    });
  }

  /**
   * running → requires_approval while one of the run's sub-runs waits for an approval: its
   * worker is still there (waiting on the sub-run), but a client sees that the run waits
   * for someone. Writes `approvals` (the calls waiting below), and `held` when the status
   * changed; a run already waiting gets only `approvals`. Returns the events' numbers.
   */
  async holdForSubRun(tenantId: string, runId: string, approvals: NewEvent[], held: NewEvent): Promise<number[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || (locked.status !== 'running' && locked.status !== 'requires_approval')) return [];
      const waiting = await tx.run.count({ where: { tenantId, parentRunId: runId, status: 'requires_approval' } });
      if (waiting === 0) return [];
      if (locked.status === 'requires_approval') return appendEventsTx(tx, tenantId, runId, approvals);
      await tx.run.update({ where: { id: runId }, data: { status: 'requires_approval' } });
      return appendEventsTx(tx, tenantId, runId, [...approvals, held]);
    });
  }

  /** Undoes holdForSubRun once none of the run's sub-runs waits for an approval any more. */
  async releaseFromSubRun(tenantId: string, runId: string, events: NewEvent[]): Promise<number[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || locked.status !== 'requires_approval') return [];
      const waiting = await tx.run.count({ where: { tenantId, parentRunId: runId, status: 'requires_approval' } });
      if (waiting > 0) return [];
      await tx.run.update({ where: { id: runId }, data: { status: 'running' } });
      return appendEventsTx(tx, tenantId, runId, events);
    });
  }
}
