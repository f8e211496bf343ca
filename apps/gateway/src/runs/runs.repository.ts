import { Injectable } from '@nestjs/common';
import { newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { MessageView } from '../sessions/sessions.repository';
import { OptionSources } from './run-defaults';
import { RunOptions } from './run-options';
import { ACTIVE_STATUSES, appendEventsTx, isTerminal, lockRun, NewEvent, RunStatus } from './run-tx';
import { shortenedToolResult, toolResultAllowance } from './context-budget';
import { CallResult, finishInTx, OPEN_CALL_STATUSES } from './tool-calls.repository';
import { WorkerHolds } from './worker-share';

export type { RunStatus } from './run-tx';

export interface RunView {
  id: string;
  tenantId: string;
  sessionId: string;
  parentRunId: string | null;
  /** For a sub-run: the parent's delegate_task call that made it. */
  parentCallId: string | null;
  /** Runs above this one: 0 for a run a client made, 1 for its sub-runs, ... */
  depth: number;
  status: RunStatus;
  input: string;
  options: RunOptions;
  /** Where each effective option came from (run, API key or tenant defaults); null for sub-runs and older runs. */
  optionSources: OptionSources | null;
  output: string | null;
  error: string | null;
  usage: Record<string, unknown> | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

export interface RunEventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

export interface NewRun {
  sessionId?: string;
  input: string;
  options: RunOptions;
  optionSources?: OptionSources;
  idempotencyKey?: string;
  sessionMetadata?: Record<string, unknown>;
  /** Queue behind a run the session already has instead of refusing. */
  enqueueWhenBusy?: boolean;
  /** A sub-run (delegate_task): shares the parent's session, not its history or its queue. */
  parentRunId?: string;
}

/** A sub-run for one delegate_task call of `parent`. */
export interface NewSubRun {
  parent: Pick<RunView, 'id' | 'sessionId' | 'depth'>;
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

export type CreateOutcome =
  | { kind: 'created' | 'existing'; run: RunView }
  | { kind: 'session_not_found' }
  | { kind: 'session_busy'; activeRunId: string };

export type ClaimOutcome =
  | { kind: 'claimed'; run: RunView; recovered: boolean; recoveries: number }
  | { kind: 'finished' }
  | { kind: 'held'; retryInMs: number };

export interface StrandedRun {
  tenantId: string;
  id: string;
  dispatchedAt: Date | null;
}

type RunRow = Prisma.RunGetPayload<object>;

interface ContextRow {
  id: string;
  run_id: string | null;
  role: string;
  tool_calls: Prisma.JsonValue;
  tool_call_id: string | null;
  created_at: Date;
  /** Length of the stored content (0 for none). */
  chars: number;
  /** The content, except a tool result's, which is read separately as far as the budget allows. */
  content: string | null;
}

/** Runs, their events and their worker leases, always within one tenant (the sweeps excepted). */
@Injectable()
export class RunsRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * Creates the run (and its session when none was named) in one transaction. The session's
   * row is locked first, so two runs posted at once to one session cannot both find it idle.
   * With an idempotency key already used, returns that first run instead.
   */
  async create(tenantId: string, input: NewRun): Promise<CreateOutcome> {
    if (input.idempotencyKey) {
      const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
      if (existing) return { kind: 'existing', run: existing };
    }
    try {
      return await this.db.tenant(tenantId, async (tx): Promise<CreateOutcome> => {
        let sessionId = input.sessionId;
        if (sessionId) {
          const session = await tx.$queryRaw<Array<{ id: string }>>`
            SELECT id FROM sessions WHERE id = ${sessionId} AND tenant_id = ${tenantId} AND status = 'active' FOR UPDATE`;
          if (session.length === 0) return { kind: 'session_not_found' };
          if (!input.parentRunId && !input.enqueueWhenBusy) {
            const active = await tx.run.findFirst({
              where: { tenantId, sessionId, parentRunId: null, status: { in: [...ACTIVE_STATUSES] } },
              orderBy: { createdAt: 'asc' },
              select: { id: true },
            });
            if (active) return { kind: 'session_busy', activeRunId: active.id };
          }
        } else {
          sessionId = (
            await tx.session.create({
              data: { id: newId('ses'), tenantId, metadata: (input.sessionMetadata ?? {}) as Prisma.InputJsonValue },
              select: { id: true },
            })
          ).id;
        }
        const row = await tx.run.create({
          data: {
            id: newId('run'),
            tenantId,
            sessionId,
            parentRunId: input.parentRunId ?? null,
            status: 'queued',
            input: input.input,
            options: input.options as Prisma.InputJsonValue,
            optionSources: input.optionSources ? (input.optionSources as Prisma.InputJsonValue) : Prisma.JsonNull,
            idempotencyKey: input.idempotencyKey ?? null,
            dispatchedAt: new Date(),
          },
        });
        await appendEventsTx(tx, tenantId, row.id, [{ type: 'run.queued', data: { session_id: sessionId } }]);
        return { kind: 'created', run: toRun(row) };
      });
    } catch (err) {
      // Two requests with one key raced: the loser returns the winner's run.
      if (input.idempotencyKey && err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') {
        const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
        if (existing) return { kind: 'existing', run: existing };
      }
      throw err;
    }
  }

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

  /** Sub-runs below the run (children, their children, ...) that have not ended, nearest first. */
  async activeDescendants(tenantId: string, runId: string): Promise<RunView[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const found: RunView[] = [];
      let frontier = [runId];
      // Depth is bounded by RUNBOX_DELEGATE_MAX_DEPTH; the cap only guards against a cycle.
      for (let level = 0; level < 16 && frontier.length > 0; level++) {
        const rows = await tx.run.findMany({
          where: { tenantId, parentRunId: { in: frontier }, status: { in: [...ACTIVE_STATUSES] } },
          orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
        });
        found.push(...rows.map(toRun));
        frontier = rows.map((r) => r.id);
      }
      return found;
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

  async find(tenantId: string, id: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.run.findFirst({ where: { id, tenantId } }));
    return row ? toRun(row) : null;
  }

  async listForSession(tenantId: string, sessionId: string | undefined, limit: number, parentRunId?: string): Promise<RunView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.run.findMany({
        where: { tenantId, ...(sessionId ? { sessionId } : {}), ...(parentRunId ? { parentRunId } : {}) },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: limit,
      }),
    );
    return rows.map(toRun);
  }

  /** The run's last assistant message, if it has one. */
  async lastAnswer(tenantId: string, runId: string): Promise<{ content: string | null; hasToolCalls: boolean } | null> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.message.findFirst({ where: { tenantId, runId, role: 'assistant' }, orderBy: { seq: 'desc' }, select: { content: true, toolCalls: true } }),
    );
    if (!row) return null;
    return { content: row.content, hasToolCalls: Array.isArray(row.toolCalls) && row.toolCalls.length > 0 };
  }

  /**
   * Takes the run for this worker. A live claim of another worker is respected (the caller
   * retries after it would lapse); a lapsed one is taken over and counted as a recovery.
   */
  async claim(tenantId: string, runId: string, owner: string, leaseMs: number): Promise<ClaimOutcome> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || isTerminal(locked.status)) return { kind: 'finished' as const };
      const heldByOther = locked.leaseOwner !== null && locked.leaseOwner !== owner;
      if (heldByOther && locked.leaseExpiresAt && locked.leaseExpiresAt > locked.now) {
        return { kind: 'held' as const, retryInMs: locked.leaseExpiresAt.getTime() - locked.now.getTime() + 500 };
      }
      const recovered = heldByOther && locked.status === 'running';
      const row = await tx.run.update({
        where: { id: runId },
        data: {
          leaseOwner: owner,
          leaseExpiresAt: new Date(locked.now.getTime() + leaseMs),
          ...(recovered ? { recoveries: { increment: 1 } } : {}),
        },
      });
      return { kind: 'claimed' as const, run: toRun(row), recovered, recoveries: row.recoveries };
    });
  }

  /** Extends this worker's claim; returns the run's status, or null when the claim was lost. */
  async renewLease(tenantId: string, runId: string, owner: string, leaseMs: number): Promise<RunStatus | null> {
    const rows = await this.db.tenant(tenantId, (tx) => tx.$queryRaw<Array<{ status: string }>>`
      UPDATE runs SET lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
       WHERE id = ${runId} AND tenant_id = ${tenantId} AND lease_owner = ${owner}
       RETURNING status`);
    return (rows[0]?.status as RunStatus | undefined) ?? null;
  }

  async releaseLease(tenantId: string, runId: string, owner: string): Promise<void> {
    await this.db.tenant(tenantId, (tx) =>
      tx.run.updateMany({ where: { id: runId, tenantId, leaseOwner: owner }, data: { leaseOwner: null, leaseExpiresAt: null } }),
    );
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

  /**
   * queued → running: stores the user's input as the next message of the session.
   * `started` is added to the run.started event (the tools the run has, and why).
   */
  async start(tenantId: string, run: RunView, started: Record<string, unknown> = {}): Promise<number[] | null> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, run.id);
      if (!locked || locked.status !== 'queued') return null;
      await tx.run.update({ where: { id: run.id }, data: { status: 'running', startedAt: locked.now } });
      await tx.message.create({
        data: { id: newId('msg'), tenantId, sessionId: run.sessionId, runId: run.id, role: 'user', content: run.input, toolCalls: Prisma.JsonNull },
      });
      return appendEventsTx(tx, tenantId, run.id, [
        { type: 'run.started', data: { session_id: run.sessionId, ...started } },
        { type: 'message.created', data: { role: 'user', content: run.input } },
      ]);
    });
  }

  /** requires_approval → running, once no call of the run still awaits a decision. */
  async resumeAfterApproval(tenantId: string, runId: string): Promise<boolean> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || locked.status !== 'requires_approval') return false;
      if ((await tx.toolCall.count({ where: { tenantId, runId, status: 'awaiting_approval' } })) > 0) return false;
      await tx.run.update({ where: { id: runId }, data: { status: 'running' } });
      return true;
    });
  }

  /**
   * running → requires_approval, only while some call still awaits a decision. A run that
   * is already `requires_approval` (held for a sub-run's approval) parks as it is.
   */
  async park(tenantId: string, runId: string): Promise<boolean> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, runId);
      if (!locked || (locked.status !== 'running' && locked.status !== 'requires_approval')) return false;
      if ((await tx.toolCall.count({ where: { tenantId, runId, status: 'awaiting_approval' } })) === 0) return false;
      if (locked.status === 'running') await tx.run.update({ where: { id: runId }, data: { status: 'requires_approval' } });
      return true;
    });
  }

  async saveUsage(tenantId: string, runId: string, usage: Record<string, unknown>): Promise<void> {
    await this.db.tenant(tenantId, (tx) => tx.run.updateMany({ where: { id: runId, tenantId }, data: { usage: usage as Prisma.InputJsonValue } }));
  }

  /**
   * Ends the run: moves it from one of `from` to a terminal status, closes every call still
   * open with `openCalls` as its result (so the session's history stays well formed for the
   * next run), and appends the terminal event, all at once. Returns the calls that were
   * running (a cancel interrupts them), or null when the run was not in `from`.
   */
  async finish(
    tenantId: string,
    run: { id: string; sessionId: string },
    from: readonly RunStatus[],
    to: RunStatus,
    extra: { output?: string; error?: string; usage?: (startedAt: Date | null, now: Date) => Record<string, unknown> },
    event: NewEvent,
    openCalls: Omit<CallResult, 'status'> & { status: 'cancelled' | 'failed' },
  ): Promise<{ runningCallIds: string[]; seqs: number[] } | null> {
    return this.db.tenant(tenantId, async (tx) => {
      const locked = await lockRun(tx, tenantId, run.id);
      if (!locked || !from.includes(locked.status)) return null;
      const open = await tx.toolCall.findMany({ where: { tenantId, runId: run.id, status: { in: [...OPEN_CALL_STATUSES] } }, orderBy: { seq: 'asc' } });
      for (const call of open) await finishInTx(tx, tenantId, run, call.callId, openCalls, OPEN_CALL_STATUSES);
      await tx.run.update({
        where: { id: run.id },
        data: {
          status: to,
          completedAt: locked.now,
          leaseOwner: null,
          leaseExpiresAt: null,
          ...(extra.output !== undefined ? { output: extra.output } : {}),
          ...(extra.error !== undefined ? { error: extra.error } : {}),
          ...(extra.usage ? { usage: extra.usage(locked.startedAt, locked.now) as Prisma.InputJsonValue } : {}),
        },
      });
      const seqs = await appendEventsTx(tx, tenantId, run.id, [event]);
      return { runningCallIds: open.filter((c) => c.status === 'running').map((c) => c.callId), seqs };
    });
  }

  /** Does an earlier top-level run of the session still go on? A queued run waits for it. */
  async hasEarlierActiveRun(tenantId: string, run: RunView): Promise<boolean> {
    const count = await this.db.tenant(tenantId, (tx) =>
      tx.run.count({
        where: {
          tenantId,
          sessionId: run.sessionId,
          parentRunId: null,
          id: { not: run.id },
          status: { in: [...ACTIVE_STATUSES] },
          OR: [{ status: { not: 'queued' } }, { createdAt: { lt: run.createdAt } }, { createdAt: run.createdAt, id: { lt: run.id } }],
        },
      }),
    );
    return count > 0;
  }

  /** The session's top-level runs that have not ended (their sub-runs go with them). */
  async activeInSession(tenantId: string, sessionId: string): Promise<RunView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.run.findMany({ where: { tenantId, sessionId, parentRunId: null, status: { in: [...ACTIVE_STATUSES] } }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] }),
    );
    return rows.map(toRun);
  }

  /** The session's oldest queued top-level run: the one to start when the current one ends. */
  async nextQueued(tenantId: string, sessionId: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.run.findFirst({ where: { tenantId, sessionId, parentRunId: null, status: 'queued' }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] }),
    );
    return row ? toRun(row) : null;
  }

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

  /**
   * Deployment-wide sweep: runs nobody is working on that should be. Queued and running
   * runs without a live claim that were not put on the queue recently (the queue message
   * was lost, or the worker died after taking it), and runs waiting for approval whose
   * approvals have all been decided.
   */
  async stranded(idleMs: number, limit = 100): Promise<StrandedRun[]> {
    const rows = await this.db.system((tx) => tx.$queryRaw<Array<{ id: string; tenant_id: string; dispatched_at: Date | null }>>`
      SELECT r.id, r.tenant_id, r.dispatched_at FROM runs r
       WHERE r.status IN ('queued', 'running', 'requires_approval')
         AND (r.lease_expires_at IS NULL OR r.lease_expires_at < now())
         AND (r.dispatched_at IS NULL OR r.dispatched_at < now() - ${idleMs} * interval '1 millisecond')
         AND (r.status <> 'requires_approval' OR NOT EXISTS (
               SELECT 1 FROM tool_calls c WHERE c.run_id = r.id AND c.status = 'awaiting_approval'))
       ORDER BY r.dispatched_at NULLS FIRST
       LIMIT ${limit}`);
    return rows.map((r) => ({ tenantId: r.tenant_id, id: r.id, dispatchedAt: r.dispatched_at }));
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

  // --- Sharing run workers between tenants: deployment-wide reads of the live leases ---

  /**
   * Top-level runs the workers of other gateway replicas hold now (a live lease), per
   * tenant, and how many replicas those are. A lease owner is `<replica>/<claim>`; the
   * caller counts its own replica's runs itself. Sub-runs are left out: they run inside
   * their parent's worker.
   */
  async workerHoldsElsewhere(replica: string): Promise<WorkerHolds> {
    const rows = await this.db.system((tx) => tx.$queryRaw<Array<{ tenant_id: string; held: number; replicas: number }>>`
      WITH live AS (
        SELECT tenant_id, split_part(lease_owner, '/', 1) AS replica FROM runs
         WHERE status IN ('queued', 'running', 'requires_approval') AND parent_run_id IS NULL
           AND lease_owner IS NOT NULL AND lease_expires_at > now())
      SELECT tenant_id, count(*)::int AS held, (SELECT count(DISTINCT replica) FROM live WHERE replica <> ${replica})::int AS replicas
        FROM live WHERE replica <> ${replica} GROUP BY tenant_id`);
    return { byTenant: new Map(rows.map((r) => [r.tenant_id, r.held])), replicas: rows[0]?.replicas ?? 0 };
  }

  // --- What a model request carries: the conversation within the context budget ---

  /**
   * The conversation the model sees: a top-level run gets the session's whole history
   * (earlier runs included) without the private work of sub-runs; a sub-run sees only its
   * own messages, since a delegated task must stand alone. Tool results are read only as
   * far as the budget lets them be sent (context-budget.ts), so neither the request nor the
   * gateway's memory grows with the size of stored results.
   */
  async modelContext(tenantId: string, run: Pick<RunView, 'id' | 'sessionId' | 'parentRunId'>, budgetChars: number): Promise<MessageView[]> {
    const scope = run.parentRunId
      ? Prisma.sql`m.run_id = ${run.id}`
      : Prisma.sql`m.session_id = ${run.sessionId} AND (m.run_id IS NULL OR m.run_id NOT IN (
          SELECT id FROM runs WHERE tenant_id = ${tenantId} AND session_id = ${run.sessionId} AND parent_run_id IS NOT NULL))`;
    return this.db.tenant(tenantId, async (tx) => {
      // First the messages without their tool results' text, then each result's allowed head.
      const rows = await tx.$queryRaw<ContextRow[]>`
        SELECT m.id, m.run_id, m.role, m.tool_calls, m.tool_call_id, m.created_at,
               coalesce(char_length(m.content), 0)::int AS chars,
               CASE WHEN m.role = 'tool' THEN NULL ELSE m.content END AS content
          FROM messages m WHERE m.tenant_id = ${tenantId} AND ${scope} ORDER BY m.seq ASC`;
      const allowances = new Map<string, number>();
      let newerChars = 0;
      for (const row of [...rows].reverse()) {
        if (row.role !== 'tool') continue;
        allowances.set(row.id, toolResultAllowance(budgetChars, newerChars));
        newerChars += row.chars;
      }
      const heads = new Map<string, string | null>();
      if (allowances.size > 0) {
        const found = await tx.$queryRaw<Array<{ id: string; head: string | null }>>`
          SELECT m.id, left(m.content, a.allowance) AS head
            FROM messages m JOIN unnest(${[...allowances.keys()]}::text[], ${[...allowances.values()]}::int[]) AS a(id, allowance) ON a.id = m.id
           WHERE m.tenant_id = ${tenantId}`;
        for (const { id, head } of found) heads.set(id, head);
      }
      return rows.map((m) => {
        const head = heads.get(m.id);
        return {
          id: m.id,
          runId: m.run_id,
          role: m.role as MessageView['role'],
          content: m.role !== 'tool' ? m.content : head == null ? null : shortenedToolResult(head, m.chars),
          toolCalls: (m.tool_calls as unknown as MessageView['toolCalls']) ?? null,
          toolCallId: m.tool_call_id,
          createdAt: m.created_at,
        };
      });
    });
  }

  private async findByIdempotencyKey(tenantId: string, key: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.run.findFirst({ where: { tenantId, idempotencyKey: key } }));
    return row ? toRun(row) : null;
  }
}

export function toRun(row: RunRow): RunView {
  return {
    id: row.id,
    tenantId: row.tenantId,
    sessionId: row.sessionId,
    parentRunId: row.parentRunId,
    parentCallId: row.parentCallId,
    depth: row.depth,
    status: row.status as RunStatus,
    input: row.input,
    options: row.options as RunOptions,
    optionSources: (row.optionSources as OptionSources | null) ?? null,
    output: row.output,
    error: row.error,
    usage: (row.usage as Record<string, unknown> | null) ?? null,
    createdAt: row.createdAt,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
  };
}
