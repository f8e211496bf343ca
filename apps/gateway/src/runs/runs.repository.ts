import { Injectable } from '@nestjs/common';
import { isUniqueViolation, newId, PrismaService, SqlTx } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { OptionSources } from './run-defaults';
import { MessageView } from '../sessions/sessions.repository';
import { readModelContext } from './run-messages.repository';
import { RunOptions } from './run-options';
import { appendEventsTx, heldByAnother, insertEventsSql, lockRun, lockRunSql, NewEvent } from './run-tx';
import { ACTIVE_STATUSES, RunStatus } from './run-status';
import { runsAheadSql } from './runs-ahead';
import { CallResult, finishInTx, OPEN_CALL_STATUSES } from './tool-calls.repository';

export type { RunStatus } from './run-status';

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
  /** The X-Request-Id of the request that made the run (its parent's, for a sub-run). */
  requestId: string | null;
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
  /** The correlation id of the request that made it. */
  requestId?: string;
}

export type CreateOutcome =
  | { kind: 'created' | 'existing'; run: RunView }
  | { kind: 'session_not_found' }
  | { kind: 'session_busy'; activeRunId: string };

/**
 * How taking a queued run up went: started (with where its session's sandbox lives and, when
 * asked for, the conversation its first model call sends), behind an earlier run, or no
 * longer queued.
 */
export type StartOutcome =
  | { kind: 'started'; seqs: number[]; executorId: string | null; context?: MessageView[] }
  | { kind: 'waiting' }
  | { kind: 'not_queued' };

/** A run `finish` ended: its calls that were running, the events written, and its times. */
export interface FinishedRun {
  runningCallIds: string[];
  seqs: number[];
  startedAt: Date | null;
  endedAt: Date;
}

type RunRow = Prisma.RunGetPayload<object>;

/**
 * Runs and their life cycle (create, start, park, resume, finish), within one tenant. Their
 * leases, events, messages, sub-runs and the deployment-wide sweeps have repositories of
 * their own beside this one.
 */
@Injectable()
export class RunsRepository {
  constructor(private readonly db: PrismaService) {}


  /**
   * Creates the run (and its session when none was named) in one transaction. The session's
   * row is locked first, so two runs posted at once to one session cannot both find it idle.
   * With an idempotency key already used, returns that first run instead. `transaction`
   * runs the creation: by default a transaction of its own; the quota check passes one
   * that holds the tenant's quota lock (QuotasService.admitSql).
   */
  async create(
    tenantId: string,
    input: NewRun,
    transaction: (work: (sql: SqlTx) => Promise<CreateOutcome>) => Promise<CreateOutcome> = (work) => this.db.tenantSql(tenantId, work),
  ): Promise<CreateOutcome> {
    if (input.idempotencyKey) {
      const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
      if (existing) return { kind: 'existing', run: existing };
    }
    try {
      return await transaction((sql) => createRun(sql, tenantId, input));
    } catch (err) {
      // Two requests with one key raced: the loser (its transaction rolled back) returns the winner's run.
      if (input.idempotencyKey && isUniqueViolation(err)) {
        const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
        if (existing) return { kind: 'existing', run: existing };
      }
      throw err;
    }
  }

  async find(tenantId: string, id: string): Promise<RunView | null> {
    const [row] = await this.db.tenantRead<RunSqlRow>(tenantId, Prisma.sql`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ${id} AND tenant_id = ${tenantId}`);
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

  /**
   * queued → running: stores the user's input as the next message of the session.
   * `started` is added to the run.started event (the tools the run has, and why). A top-level
   * run behind an earlier one of its session that has not ended stays queued (`waiting`).
   * After the run's lock, the check for earlier runs, the start, its message and events and
   * the read of where the session's sandbox lives are one statement. With
   * `contextBudgetChars`, the conversation for the first model call (the new message
   * included) is read in the same transaction rather than in one of its own. With `lease`,
   * the start takes the run's lease for that worker (RunLeasesRepository.claim only read
   * the queued run); a run another worker holds is left to it (`not_queued`).
   */
  async start(
    tenantId: string,
    run: RunView,
    started: Record<string, unknown> = {},
    contextBudgetChars?: number,
    lease?: { owner: string; ms: number },
  ): Promise<StartOutcome> {
    return this.db.tenantSql(tenantId, async (sql): Promise<StartOutcome> => {
      const locked = await lockRunSql(sql, tenantId, run.id);
      if (!locked || locked.status !== 'queued') return { kind: 'not_queued' };
      if (lease && heldByAnother(locked, lease.owner)) return { kind: 'not_queued' };
      const takeLease = lease ? Prisma.sql`, lease_owner = ${lease.owner}, lease_expires_at = now() + ${lease.ms}::int * interval '1 millisecond'` : Prisma.empty;
      const events: NewEvent[] = [
        { type: 'run.started', data: { session_id: run.sessionId, ...started } },
        { type: 'message.created', data: { role: 'user', content: run.input } },
      ];
      // A sub-run shares its parent's session and never waits for the parent's runs.
      const earlier = run.parentRunId ? Prisma.sql`SELECT 0 AS n` : earlierActiveRunsSql(tenantId, run);
      const [row] = await sql.query<{ earlier: number; seqs: number[]; executor_id: string | null }>(Prisma.sql`
        WITH earlier AS (${earlier}),
        started AS (
          UPDATE runs SET status = 'running', started_at = now()${takeLease}
           WHERE id = ${run.id} AND tenant_id = ${tenantId} AND (SELECT n FROM earlier) = 0
          RETURNING id),
        message AS (
          INSERT INTO messages (id, tenant_id, session_id, run_id, role, content, tool_calls)
          SELECT ${newId('msg')}::text, ${tenantId}::text, ${run.sessionId}::text, started.id, 'user', ${run.input}::text, NULL FROM started),
        events AS (${insertEventsSql(tenantId, run.id, events, 'started')})
        SELECT (SELECT n FROM earlier)::int AS earlier,
               coalesce((SELECT array_agg(seq ORDER BY seq) FROM events), '{}')::int[] AS seqs,
               (SELECT executor_id FROM sandboxes WHERE session_id = ${run.sessionId} AND tenant_id = ${tenantId} AND state <> 'removed' LIMIT 1) AS executor_id`);
      if (row.earlier > 0) return { kind: 'waiting' };
      const context = contextBudgetChars === undefined ? undefined : await readModelContext(sql, tenantId, run, contextBudgetChars);
      return { kind: 'started', seqs: row.seqs, executorId: row.executor_id, context };
    });
  }

  /**
   * The model's final answer (it asked for no tool) and the run's completion, in one
   * transaction: the assistant message and its message.created event, the run completed
   * with its output and usage and its run.completed event, the lease let go. Null, with
   * nothing written, when the run is no longer running (cancelled meanwhile). Also names the
   * session's oldest queued run, which the run's end lets start. After the run's lock, all
   * of it is one statement.
   */
  async completeWithAnswer(
    tenantId: string,
    run: { id: string; sessionId: string; parentRunId: string | null },
    answer: { content: string | null; output: string },
    usage: { event: Record<string, unknown>; stored: (startedAt: Date | null, now: Date) => Record<string, unknown> },
  ): Promise<(FinishedRun & { nextQueuedRunId: string | null }) | null> {
    return this.db.tenantSql(tenantId, async (sql) => {
      const locked = await lockRunSql(sql, tenantId, run.id);
      if (!locked || locked.status !== 'running') return null;
      const events: NewEvent[] = [
        { type: 'message.created', data: { role: 'assistant', content: answer.content, tool_calls: [] } },
        { type: 'run.completed', data: { output: answer.output, usage: usage.event } },
      ];
      // The next queued run is read in the same statement, which does not see the run's own
      // change to `completed`; it was `running`, so it is not among the queued ones anyway.
      const next = run.parentRunId
        ? Prisma.sql`NULL::text`
        : Prisma.sql`(SELECT id FROM runs WHERE tenant_id = ${tenantId} AND session_id = ${run.sessionId} AND parent_run_id IS NULL
                       AND status = 'queued' ORDER BY created_at ASC, id ASC LIMIT 1)`;
      const [row] = await sql.query<{ seqs: number[]; next: string | null }>(Prisma.sql`
        WITH message AS (
          INSERT INTO messages (id, tenant_id, session_id, run_id, role, content, tool_calls)
          VALUES (${newId('msg')}, ${tenantId}, ${run.sessionId}, ${run.id}, 'assistant', ${answer.content}::text, NULL)),
        completed AS (
          UPDATE runs SET status = 'completed', completed_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                 output = ${answer.output}::text, usage = ${JSON.stringify(usage.stored(locked.startedAt, locked.now))}::jsonb
           WHERE id = ${run.id} AND tenant_id = ${tenantId}),
        events AS (${insertEventsSql(tenantId, run.id, events)})
        SELECT coalesce((SELECT array_agg(seq ORDER BY seq) FROM events), '{}')::int[] AS seqs, ${next} AS next`);
      return { runningCallIds: [], seqs: row.seqs, startedAt: locked.startedAt, endedAt: locked.now, nextQueuedRunId: row.next };
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
  ): Promise<FinishedRun | null> {
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
      return { runningCallIds: open.filter((c) => c.status === 'running').map((c) => c.callId), seqs, startedAt: locked.startedAt, endedAt: locked.now };
    });
  }

  private async findByIdempotencyKey(tenantId: string, key: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.run.findFirst({ where: { tenantId, idempotencyKey: key } }));
    return row ? toRun(row) : null;
  }
}

/**
 * The creation's statements, raw SQL (the tenant's quota lock is held until the commit):
 * the named session's lock and, unless the run may queue, the check for a run it has
 * going; then one statement for the new session (when none was named), the run and its
 * first event.
 */
async function createRun(sql: SqlTx, tenantId: string, input: NewRun): Promise<CreateOutcome> {
  const sessionId = input.sessionId;
  if (sessionId) {
    const session = await sql.query<{ id: string }>(Prisma.sql`
      SELECT id FROM sessions WHERE id = ${sessionId} AND tenant_id = ${tenantId} AND status = 'active' FOR UPDATE`);
    if (session.length === 0) return { kind: 'session_not_found' };
    if (!input.parentRunId && !input.enqueueWhenBusy) {
      const [active] = await sql.query<{ id: string }>(Prisma.sql`
        SELECT id FROM runs WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} AND parent_run_id IS NULL
           AND status IN (${Prisma.join([...ACTIVE_STATUSES])}) ORDER BY created_at ASC LIMIT 1`);
      if (active) return { kind: 'session_busy', activeRunId: active.id };
    }
  }
  const runId = newId('run');
  const newSession = sessionId ? undefined : newId('ses');
  const [row] = await sql.query<RunSqlRow>(Prisma.sql`
    WITH ${newSession ? Prisma.sql`session AS (
           INSERT INTO sessions (id, tenant_id, metadata, created_at)
           VALUES (${newSession}, ${tenantId}, ${JSON.stringify(input.sessionMetadata ?? {})}::jsonb, clock_timestamp())),` : Prisma.empty}
         run AS (
           INSERT INTO runs (id, tenant_id, session_id, parent_run_id, status, input, options, option_sources,
                             idempotency_key, request_id, created_at, dispatched_at)
           VALUES (${runId}, ${tenantId}, ${sessionId ?? newSession}, ${input.parentRunId ?? null}, 'queued', ${input.input},
                   ${JSON.stringify(input.options)}::jsonb, ${input.optionSources ? JSON.stringify(input.optionSources) : null}::jsonb,
                   ${input.idempotencyKey ?? null}, ${input.requestId ?? null}, clock_timestamp(), clock_timestamp())
           RETURNING ${RUN_COLUMNS}),
         events AS (${insertEventsSql(tenantId, runId, [{ type: 'run.queued', data: { session_id: sessionId ?? newSession } }])})
    SELECT * FROM run`);
  return { kind: 'created', run: toRun(row) };
}

/**
 * How many top-level runs of the session go on ahead of `run` (`n`): running or parked
 * ones, and queued ones made before it. A queued run waits for them.
 */
function earlierActiveRunsSql(tenantId: string, run: RunView): Prisma.Sql {
  const createdAt = Prisma.sql`${run.createdAt.toISOString()}::timestamptz`;
  const ahead = runsAheadSql('e', { tenantId: Prisma.sql`${tenantId}`, sessionId: Prisma.sql`${run.sessionId}`, id: Prisma.sql`${run.id}`, createdAt });
  return Prisma.sql`SELECT count(*)::int AS n FROM runs e WHERE ${ahead}`;
}

/** The columns a run view is made from, as raw SQL returns them (`RETURNING ${RUN_COLUMNS}`). */
export type RunSqlRow = Pick<
  RunRow,
  | 'id' | 'tenantId' | 'sessionId' | 'parentRunId' | 'parentCallId' | 'depth' | 'status' | 'input' | 'options' | 'optionSources'
  | 'output' | 'error' | 'usage' | 'createdAt' | 'startedAt' | 'completedAt' | 'requestId' | 'recoveries'
>;

/** RunSqlRow's columns, named as Prisma names them, so `toRun` reads raw rows as it reads the ORM's. */
export const RUN_COLUMNS = Prisma.raw(
  'id, tenant_id AS "tenantId", session_id AS "sessionId", parent_run_id AS "parentRunId", parent_call_id AS "parentCallId", depth, status, input, options, ' +
    'option_sources AS "optionSources", output, error, usage, created_at AS "createdAt", started_at AS "startedAt", completed_at AS "completedAt", ' +
    'request_id AS "requestId", recoveries',
);

export function toRun(row: RunSqlRow): RunView {
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
    requestId: row.requestId,
  };
}
