import { Injectable } from '@nestjs/common';
import { newId, PrismaService, Tx } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { appendEventsTx, lockRun, NewEvent } from './run-tx';
import { isTerminal } from './run-status';

/**
 * A tool call's life: `pending` (the model asked for it) → `running` → `completed` | `failed`,
 * or → `awaiting_approval` → `approved` | `denied`, or straight to `refused`. `interrupted`
 * marks a call that was running when its worker died (its outcome is unknown, so it is
 * never run again), `cancelled` one the run's cancellation cut short.
 */
export type ToolCallStatus =
  | 'pending'
  | 'awaiting_approval'
  | 'approved'
  | 'denied'
  | 'running'
  | 'completed'
  | 'failed'
  | 'refused'
  | 'interrupted'
  | 'cancelled';

export const OPEN_CALL_STATUSES: readonly ToolCallStatus[] = ['pending', 'awaiting_approval', 'approved', 'denied', 'running'];

export interface ToolCallView {
  runId: string;
  callId: string;
  seq: number;
  turn: number;
  name: string;
  /** The parsed arguments, or `{_raw: text}` when the model's JSON did not parse. */
  arguments: unknown;
  status: ToolCallStatus;
  output: string | null;
  isError: boolean;
  decision: string | null;
  reason: string | null;
  expiresAt: Date | null;
}

/**
 * A call without its result: what numbering and the loop's guards read. A run's results can
 * add up to many megabytes, and these are read every turn.
 */
export type ToolCallHeader = Omit<ToolCallView, 'output'>;

export interface NewToolCall {
  callId: string;
  name: string;
  arguments: unknown;
}

export interface CallResult {
  status: Extract<ToolCallStatus, 'completed' | 'failed' | 'refused' | 'interrupted' | 'cancelled'>;
  output: string;
  isError: boolean;
  metadata?: Record<string, unknown>;
  decision?: string;
  reason?: string;
}

export type DecideOutcome =
  | { ok: true; runStatus: string; stillAwaiting: number; seqs: number[] }
  | { ok: false; problem: 'run_not_found' | 'run_finished' | 'call_not_found' | 'not_awaiting'; status?: string };

type Row = Prisma.ToolCallGetPayload<object>;

/** A run's tool calls and the tool messages that carry their results, within one tenant. */
@Injectable()
export class ToolCallsRepository {
  constructor(private readonly db: PrismaService) {}

  /** The calls of the run's latest model turn, in the order the model made them. */
  async latestTurn(tenantId: string, runId: string): Promise<ToolCallView[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const last = await tx.toolCall.findFirst({ where: { tenantId, runId }, orderBy: { seq: 'desc' }, select: { turn: true } });
      if (!last) return [];
      const rows = await tx.toolCall.findMany({ where: { tenantId, runId, turn: last.turn }, orderBy: { seq: 'asc' } });
      return rows.map(toView);
    });
  }

  /** Every call of the run, oldest first, without the outputs (the repetition guard reads the sequence). */
  async all(tenantId: string, runId: string): Promise<ToolCallHeader[]> {
    const rows = await this.db.tenant(tenantId, (tx) => tx.toolCall.findMany({ where: { tenantId, runId }, orderBy: { seq: 'asc' }, omit: { output: true } }));
    return rows.map(toHeader);
  }

  async awaiting(tenantId: string, runId: string): Promise<ToolCallView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.toolCall.findMany({ where: { tenantId, runId, status: 'awaiting_approval' }, orderBy: { seq: 'asc' } }),
    );
    return rows.map(toView);
  }

  /**
   * Stores one model answer: the assistant message and, in the same transaction, a pending
   * row for each tool call it asked for, numbered after the run's earlier calls. A worker
   * that dies after this knows exactly which calls exist and that none of them started.
   */
  async recordTurn(
    tenantId: string,
    run: { id: string; sessionId: string },
    answer: { content: string | null; toolCalls: NewToolCall[]; rawCalls: Array<{ id: string; name: string; arguments: string }> },
    events: (first: { seq: number; turn: number }) => NewEvent[],
    usage: Record<string, unknown>,
  ): Promise<number[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, run.id);
      if (!locked || isTerminal(locked.status)) return [];
      const last = await tx.toolCall.findFirst({ where: { tenantId, runId: run.id }, orderBy: { seq: 'desc' }, select: { seq: true, turn: true } });
      const firstSeq = (last?.seq ?? 0) + 1;
      const turn = (last?.turn ?? 0) + 1;
      await tx.message.create({
        data: {
          id: newId('msg'),
          tenantId,
          sessionId: run.sessionId,
          runId: run.id,
          role: 'assistant',
          content: answer.content,
          toolCalls: answer.rawCalls.length > 0 ? (answer.rawCalls as unknown as Prisma.InputJsonValue) : Prisma.JsonNull,
        },
      });
      if (answer.toolCalls.length > 0) {
        await tx.toolCall.createMany({
          data: answer.toolCalls.map((c, i) => ({
            id: newId('tc'),
            tenantId,
            runId: run.id,
            sessionId: run.sessionId,
            callId: c.callId,
            seq: firstSeq + i,
            turn,
            name: c.name,
            arguments: (c.arguments ?? {}) as Prisma.InputJsonValue,
            status: 'pending',
          })),
        });
      }
      await tx.run.updateMany({ where: { id: run.id, tenantId }, data: { usage: usage as Prisma.InputJsonValue } });
      return appendEventsTx(tx, tenantId, run.id, events({ seq: firstSeq, turn }));
    });
  }

  /** pending → awaiting_approval, with the time an undecided approval is denied. */
  async markAwaiting(tenantId: string, runId: string, callId: string, expiresAt: Date, reason: string, event: NewEvent): Promise<number[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || isTerminal(locked.status)) return [];
      const res = await tx.toolCall.updateMany({
        where: { tenantId, runId, callId, status: 'pending' },
        data: { status: 'awaiting_approval', expiresAt, reason },
      });
      return res.count > 0 ? appendEventsTx(tx, tenantId, runId, [event]) : [];
    });
  }

  /**
   * pending | approved → running, recorded before the call is sent anywhere: a call found
   * `running` by a later worker may have run, so it is reported, never repeated.
   */
  async markStarted(tenantId: string, runId: string, callId: string, decision: string, event: NewEvent): Promise<number[] | null> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || isTerminal(locked.status)) return null;
      const res = await tx.toolCall.updateMany({
        where: { tenantId, runId, callId, status: { in: ['pending', 'approved'] } },
        data: { status: 'running', decision, startedAt: new Date() },
      });
      if (res.count === 0) return null;
      return appendEventsTx(tx, tenantId, runId, [event]);
    });
  }

  /**
   * Records a call's result and the tool message the model will read, once: a call already
   * finished (by a cancellation, say) is left as it is and false is returned.
   */
  async finish(tenantId: string, run: { id: string; sessionId: string }, callId: string, result: CallResult, events: NewEvent[]): Promise<number[] | null> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, run.id);
      if (!locked) return null;
      const done = await finishInTx(tx, tenantId, run, callId, result, OPEN_CALL_STATUSES);
      if (!done) return null;
      return isTerminal(locked.status) ? [] : appendEventsTx(tx, tenantId, run.id, events);
    });
  }

  /**
   * An approver's (or the approval timeout's) decision on an awaiting call. Takes the run's
   * lock, so it cannot slip between a worker's "anything still awaiting?" and its parking
   * the run: whoever comes second sees the other's write.
   */
  async decide(tenantId: string, runId: string, callId: string, approve: boolean, decision: string, reason: string, event: NewEvent): Promise<DecideOutcome> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked) return { ok: false, problem: 'run_not_found' };
      if (isTerminal(locked.status)) return { ok: false, problem: 'run_finished', status: locked.status };
      const call = await tx.toolCall.findFirst({ where: { tenantId, runId, callId }, select: { status: true } });
      if (!call) return { ok: false, problem: 'call_not_found' };
      if (call.status !== 'awaiting_approval') return { ok: false, problem: 'not_awaiting', status: call.status };
      await tx.toolCall.updateMany({
        where: { tenantId, runId, callId, status: 'awaiting_approval' },
        data: { status: approve ? 'approved' : 'denied', decision, reason },
      });
      const stillAwaiting = await tx.toolCall.count({ where: { tenantId, runId, status: 'awaiting_approval' } });
      const seqs = await appendEventsTx(tx, tenantId, runId, [event]);
      return { ok: true, runStatus: locked.status, stillAwaiting, seqs };
    });
  }
}

/** Finishes one open call and writes its tool message; false when it was not open. */
export async function finishInTx(
  tx: Tx,
  tenantId: string,
  run: { id: string; sessionId: string },
  callId: string,
  result: CallResult,
  from: readonly ToolCallStatus[],
): Promise<boolean> {
  const res = await tx.toolCall.updateMany({
    where: { tenantId, runId: run.id, callId, status: { in: [...from] } },
    data: {
      status: result.status,
      output: result.output,
      isError: result.isError,
      metadata: (result.metadata ?? {}) as Prisma.InputJsonValue,
      ...(result.decision !== undefined ? { decision: result.decision } : {}),
      ...(result.reason !== undefined ? { reason: result.reason } : {}),
      completedAt: new Date(),
    },
  });
  if (res.count === 0) return false;
  await tx.message.create({
    data: { id: newId('msg'), tenantId, sessionId: run.sessionId, runId: run.id, role: 'tool', content: result.output, toolCallId: callId, toolCalls: Prisma.JsonNull },
  });
  return true;
}

function toView(row: Row): ToolCallView {
  return { ...toHeader(row), output: row.output };
}

function toHeader(row: Omit<Row, 'output'>): ToolCallHeader {
  return {
    runId: row.runId,
    callId: row.callId,
    seq: row.seq,
    turn: row.turn,
    name: row.name,
    arguments: row.arguments,
    status: row.status as ToolCallStatus,
    isError: row.isError,
    decision: row.decision,
    reason: row.reason,
    expiresAt: row.expiresAt,
  };
}
