import { RunboxConfig } from '@app/config';
import { ToolCallReply, ToolCallRequest } from '@app/contracts';
import pino from 'pino';
import { ModelProvider, ModelRequest, ModelResponse } from '../../models/model-provider';
import { MessageView } from '../../sessions/sessions.repository';
import type { ExecutorClient } from '../../tools/executor.client';
import type { RunEventsRepository } from '../run-events.repository';
import type { ClaimOutcome, RunLeasesRepository } from '../run-leases.repository';
import type { RunMessagesRepository } from '../run-messages.repository';
import { RunOptions } from '../run-options';
import { NewEvent } from '../run-tx';
import { isTerminal } from '../run-status';
import type { RunsRepository, RunView } from '../runs.repository';
import type { CallResult, NewToolCall, ToolCallsRepository, ToolCallStatus, ToolCallView } from '../tool-calls.repository';
import { OPEN_CALL_STATUSES } from '../tool-calls.repository';

/**
 * The run tables in memory, with the same rules as the Postgres repositories (what each
 * state change requires, what it writes, event numbering), so the orchestration can be
 * unit-tested without a database. Time is `Date.now()`, which jest's fake timers control.
 */
export class InMemoryRuns {
  readonly runs = new Map<string, StoredRun>();
  readonly messages: Array<MessageView & { sessionId: string }> = [];
  readonly calls: ToolCallView[] = [];
  readonly events = new Map<string, NewEvent[]>();
  /** The run-loop repository methods called, in order: what a step reads and writes. */
  readonly repositoryCalls: string[] = [];
  private ids = 0;

  addRun(fields: Partial<StoredRun> & { options?: RunOptions } = {}): StoredRun {
    const id = fields.id ?? `run_${++this.ids}`;
    const run: StoredRun = {
      id,
      tenantId: 'ten_1',
      sessionId: 'ses_1',
      parentRunId: null,
      parentCallId: null,
      depth: 0,
      status: 'queued',
      input: 'do the task',
      options: {},
      optionSources: null,
      output: null,
      error: null,
      usage: null,
      createdAt: new Date(Date.now() + this.ids),
      startedAt: null,
      completedAt: null,
      requestId: null,
      leaseOwner: null,
      leaseExpiresAt: null,
      recoveries: 0,
      ...fields,
    };
    this.runs.set(id, run);
    return run;
  }

  run(id: string): StoredRun {
    const run = this.runs.get(id);
    if (!run) throw new Error(`no run ${id}`);
    return run;
  }

  /** A snapshot, as a repository would return it. */
  view(id: string): RunView {
    const { leaseOwner: _owner, leaseExpiresAt: _expires, recoveries: _recoveries, ...view } = this.run(id);
    return { ...view };
  }

  eventTypes(runId: string): string[] {
    return (this.events.get(runId) ?? []).map((e) => e.type);
  }

  callsOf(runId: string): ToolCallView[] {
    return this.calls.filter((c) => c.runId === runId).sort((a, b) => a.seq - b.seq);
  }

  addMessage(run: { id: string; sessionId: string }, message: Pick<MessageView, 'role' | 'content'> & Partial<MessageView>): void {
    this.messages.push({ id: `msg_${++this.ids}`, runId: run.id, toolCalls: null, toolCallId: null, createdAt: new Date(), sessionId: run.sessionId, ...message });
  }

  append(runId: string, events: NewEvent[]): number[] {
    const list = this.events.get(runId) ?? [];
    this.events.set(runId, list);
    const first = list.length + 1;
    list.push(...events);
    return events.map((_, i) => first + i);
  }

  finishCall(run: { id: string; sessionId: string }, callId: string, result: CallResult, from: readonly ToolCallStatus[]): boolean {
    const call = this.calls.find((c) => c.runId === run.id && c.callId === callId);
    if (!call || !from.includes(call.status)) return false;
    Object.assign(call, {
      status: result.status,
      output: result.output,
      isError: result.isError,
      ...(result.decision !== undefined ? { decision: result.decision } : {}),
      ...(result.reason !== undefined ? { reason: result.reason } : {}),
    });
    this.addMessage(run, { role: 'tool', content: result.output, toolCallId: callId });
    return true;
  }

  awaitingCount(runId: string): number {
    return this.calls.filter((c) => c.runId === runId && c.status === 'awaiting_approval').length;
  }

  runsRepository(): RunsRepository {
    const fake: Pick<RunsRepository, 'find' | 'start' | 'completeWithAnswer' | 'resumeAfterApproval' | 'park' | 'finish'> = {
      find: async (_tenantId, id) => (this.runs.has(id) ? this.view(id) : null),
      start: async (_tenantId, run, _started, _budget, lease) => {
        this.repositoryCalls.push('start');
        const stored = this.run(run.id);
        if (stored.status !== 'queued') return { kind: 'not_queued' };
        const now = Date.now();
        if (lease && stored.leaseOwner !== null && stored.leaseOwner !== lease.owner && (stored.leaseExpiresAt ?? 0) > now) return { kind: 'not_queued' };
        const earlier = [...this.runs.values()].some(
          (r) => r.sessionId === run.sessionId && !r.parentRunId && r.id !== run.id && !isTerminal(r.status) && (r.status !== 'queued' || r.createdAt < run.createdAt),
        );
        if (!run.parentRunId && earlier) return { kind: 'waiting' };
        Object.assign(stored, { status: 'running', startedAt: new Date() }, lease ? { leaseOwner: lease.owner, leaseExpiresAt: now + lease.ms } : {});
        this.addMessage(run, { role: 'user', content: run.input });
        const seqs = this.append(run.id, [
          { type: 'run.started', data: { session_id: run.sessionId } },
          { type: 'message.created', data: { role: 'user', content: run.input } },
        ]);
        return { kind: 'started', seqs, executorId: null };
      },
      completeWithAnswer: async (_tenantId, run, answer, usage) => {
        this.repositoryCalls.push('completeWithAnswer');
        const stored = this.run(run.id);
        if (stored.status !== 'running') return null;
        this.addMessage(run, { role: 'assistant', content: answer.content });
        const now = new Date();
        Object.assign(stored, { status: 'completed', completedAt: now, leaseOwner: null, leaseExpiresAt: null, output: answer.output, usage: usage.stored(stored.startedAt, now) });
        const seqs = this.append(run.id, [
          { type: 'message.created', data: { role: 'assistant', content: answer.content, tool_calls: [] } },
          { type: 'run.completed', data: { output: answer.output, usage: usage.event } },
        ]);
        const next = run.parentRunId
          ? undefined
          : [...this.runs.values()].filter((r) => r.sessionId === run.sessionId && !r.parentRunId && r.status === 'queued').sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())[0];
        return { runningCallIds: [], seqs, startedAt: stored.startedAt, endedAt: now, nextQueuedRunId: next?.id ?? null };
      },
      resumeAfterApproval: async (_tenantId, runId) => {
        const stored = this.run(runId);
        if (stored.status !== 'requires_approval' || this.awaitingCount(runId) > 0) return false;
        stored.status = 'running';
        return true;
      },
      park: async (_tenantId, runId) => {
        const stored = this.run(runId);
        if ((stored.status !== 'running' && stored.status !== 'requires_approval') || this.awaitingCount(runId) === 0) return false;
        stored.status = 'requires_approval';
        return true;
      },
      finish: async (_tenantId, run, from, to, extra, event, openCalls) => {
        this.repositoryCalls.push('finish');
        const stored = this.run(run.id);
        if (!from.includes(stored.status)) return null;
        const open = this.callsOf(run.id).filter((c) => OPEN_CALL_STATUSES.includes(c.status));
        const runningCallIds = open.filter((c) => c.status === 'running').map((c) => c.callId);
        for (const call of open) this.finishCall(run, call.callId, openCalls, OPEN_CALL_STATUSES);
        const now = new Date();
        Object.assign(stored, {
          status: to,
          completedAt: now,
          leaseOwner: null,
          leaseExpiresAt: null,
          ...(extra.output !== undefined ? { output: extra.output } : {}),
          ...(extra.error !== undefined ? { error: extra.error } : {}),
          ...(extra.usage ? { usage: extra.usage(stored.startedAt, now) } : {}),
        });
        return { runningCallIds, seqs: this.append(run.id, [event]), startedAt: stored.startedAt, endedAt: now };
      },
    };
    return fake as RunsRepository;
  }

  messagesRepository(): RunMessagesRepository {
    const fake: Pick<RunMessagesRepository, 'modelContext' | 'lastAnswer'> = {
      // A sub-run sees its own messages; a top-level run the session's, less its sub-runs' work.
      // The budget is not applied here: these tests are about the loop, not the context.
      modelContext: async (_tenantId, run) => {
        this.repositoryCalls.push('modelContext');
        return this.messages.filter((m) =>
          run.parentRunId ? m.runId === run.id : m.sessionId === run.sessionId && !(m.runId && this.runs.get(m.runId)?.parentRunId),
        );
      },
      lastAnswer: async (_tenantId, runId) => {
        this.repositoryCalls.push('lastAnswer');
        const last = this.messages.filter((m) => m.runId === runId && m.role === 'assistant').at(-1);
        return last ? { content: last.content, hasToolCalls: (last.toolCalls ?? []).length > 0 } : null;
      },
    };
    return fake as unknown as RunMessagesRepository;
  }

  toolCallsRepository(): ToolCallsRepository {
    const live = (runId: string) => !isTerminal(this.run(runId).status);
    const fake: Pick<ToolCallsRepository, 'latestTurn' | 'all' | 'awaiting' | 'recordTurn' | 'markAwaiting' | 'markStarted' | 'finish'> = {
      latestTurn: async (_tenantId, runId) => {
        this.repositoryCalls.push('latestTurn');
        const calls = this.callsOf(runId);
        const turn = calls.at(-1)?.turn;
        return calls.filter((c) => c.turn === turn).map((c) => ({ ...c }));
      },
      all: async (_tenantId, runId) => {
        this.repositoryCalls.push('all');
        return this.callsOf(runId).map((c) => ({ ...c }));
      },
      awaiting: async (_tenantId, runId) => this.callsOf(runId).filter((c) => c.status === 'awaiting_approval').map((c) => ({ ...c })),
      recordTurn: async (_tenantId, run, answer, events, usage) => {
        this.repositoryCalls.push('recordTurn');
        if (!live(run.id)) return [];
        const last = this.callsOf(run.id).at(-1);
        const first = { seq: (last?.seq ?? 0) + 1, turn: (last?.turn ?? 0) + 1 };
        this.addMessage(run, {
          role: 'assistant',
          content: answer.content,
          toolCalls: answer.rawCalls.length > 0 ? answer.rawCalls.map((c) => ({ ...c })) : null,
        });
        answer.toolCalls.forEach((c: NewToolCall, i) => this.calls.push(newCall(run.id, c, first.seq + i, first.turn)));
        this.run(run.id).usage = usage;
        return this.append(run.id, events(first));
      },
      markAwaiting: async (_tenantId, runId, callId, expiresAt, reason, event) => {
        const call = this.calls.find((c) => c.runId === runId && c.callId === callId);
        if (!live(runId) || call?.status !== 'pending') return [];
        Object.assign(call, { status: 'awaiting_approval', expiresAt, reason });
        return this.append(runId, [event]);
      },
      markStarted: async (_tenantId, runId, callId, decision, event) => {
        const call = this.calls.find((c) => c.runId === runId && c.callId === callId);
        if (!live(runId) || !call || (call.status !== 'pending' && call.status !== 'approved')) return null;
        Object.assign(call, { status: 'running', decision });
        return this.append(runId, [event]);
      },
      finish: async (_tenantId, run, callId, result, events) => {
        if (!this.runs.has(run.id) || !this.finishCall(run, callId, result, OPEN_CALL_STATUSES)) return null;
        return live(run.id) ? this.append(run.id, events) : [];
      },
    };
    return fake as ToolCallsRepository;
  }

  eventsRepository(): RunEventsRepository {
    const fake: Pick<RunEventsRepository, 'appendEvents'> = {
      appendEvents: async (_tenantId, runId, events) => (!this.runs.has(runId) || isTerminal(this.run(runId).status) ? [] : this.append(runId, events)),
    };
    return fake as RunEventsRepository;
  }

  leasesRepository(): RunLeasesRepository {
    const fake: Pick<RunLeasesRepository, 'claim' | 'renewLease' | 'releaseLease' | 'workerHoldsElsewhere'> = {
      claim: async (_tenantId, runId, owner, leaseMs): Promise<ClaimOutcome> => {
        this.repositoryCalls.push('claim');
        const run = this.runs.get(runId);
        if (!run || isTerminal(run.status)) return { kind: 'finished' };
        const now = Date.now();
        const heldByOther = run.leaseOwner !== null && run.leaseOwner !== owner;
        if (heldByOther && run.leaseExpiresAt !== null && run.leaseExpiresAt > now) return { kind: 'held', retryInMs: run.leaseExpiresAt - now + 500 };
        // A queued run is only read: its start takes the lease.
        if (run.status === 'queued') return { kind: 'claimed', run: this.view(runId), recovered: false, recoveries: run.recoveries };
        const recovered = heldByOther && run.status === 'running';
        Object.assign(run, { leaseOwner: owner, leaseExpiresAt: now + leaseMs, recoveries: run.recoveries + (recovered ? 1 : 0) });
        return { kind: 'claimed', run: this.view(runId), recovered, recoveries: run.recoveries };
      },
      renewLease: async (_tenantId, runId, owner, leaseMs) => {
        const run = this.runs.get(runId);
        const takesQueued = run?.status === 'queued' && (run.leaseOwner === null || (run.leaseExpiresAt ?? 0) < Date.now());
        if (!run || (run.leaseOwner !== owner && !takesQueued)) return null;
        Object.assign(run, { leaseOwner: owner, leaseExpiresAt: Date.now() + leaseMs });
        return run.status;
      },
      releaseLease: async (_tenantId, runId, owner) => {
        const run = this.runs.get(runId);
        if (run && run.leaseOwner === owner) Object.assign(run, { leaseOwner: null, leaseExpiresAt: null });
      },
      // One replica: no other holds anything.
      workerHoldsElsewhere: async () => ({ byTenant: new Map(), replicas: 0 }),
    };
    return fake as RunLeasesRepository;
  }
}

export interface StoredRun extends RunView {
  leaseOwner: string | null;
  /** Milliseconds since the epoch. */
  leaseExpiresAt: number | null;
  recoveries: number;
}

function newCall(runId: string, call: NewToolCall, seq: number, turn: number): ToolCallView {
  const base = { runId, callId: call.callId, seq, turn, name: call.name, arguments: call.arguments ?? {} };
  return { ...base, status: 'pending', output: null, isError: false, decision: null, reason: null, expiresAt: null };
}

/** A model that gives the scripted answers in order and keeps every request it was sent. */
export class ScriptedModel implements ModelProvider {
  readonly requests: ModelRequest[] = [];
  private ids = 0;

  constructor(private readonly script: Array<Array<[name: string, args: Record<string, unknown>]> | string>) {}

  complete(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const next = this.script.shift();
    if (next === undefined) return Promise.reject(new Error('the scripted model has no more answers'));
    const usage = { inputTokens: 10, outputTokens: 5 };
    if (typeof next === 'string') return Promise.resolve({ content: next, toolCalls: [], usage });
    const toolCalls = next.map(([name, args]) => ({ id: `call_${++this.ids}`, name, arguments: JSON.stringify(args) }));
    return Promise.resolve({ content: null, toolCalls, usage });
  }
}

/**
 * An executor that answers each call at once, or, for a call whose subject (tool and path,
 * command or pattern) was held, only when the test releases it. `log` records starts and ends in order.
 */
export class FakeExecutor {
  readonly log: string[] = [];
  readonly cancelled: string[] = [];
  /** Each call, with the executor it was pinned to (null: any executor may take it). */
  readonly routes: Array<{ subject: string; executorId: string | null }> = [];
  private readonly held = new Map<string, () => void>();
  private readonly holding = new Set<string>();
  private readonly started = new Map<string, () => void>();

  hold(subject: string): void {
    this.holding.add(subject);
  }

  /** Resolves once a held call on `subject` has started. */
  whenStarted(subject: string): Promise<void> {
    if (this.log.includes(`start ${subject}`)) return Promise.resolve();
    return new Promise((resolve) => this.started.set(subject, resolve));
  }

  release(subject: string): void {
    this.holding.delete(subject);
    this.held.get(subject)?.();
  }

  callTool = async (request: ToolCallRequest, executorId: string | null = null): Promise<ToolCallReply> => {
    const args = request.arguments as Record<string, unknown>;
    const subject = `${request.tool}:${String(args.path ?? args.command ?? args.pattern ?? '')}`;
    this.routes.push({ subject, executorId });
    this.log.push(`start ${subject}`);
    this.started.get(subject)?.();
    if (this.holding.has(subject)) await new Promise<void>((resolve) => this.held.set(subject, resolve));
    this.log.push(`end ${subject}`);
    return { ok: true, executor_id: 'exec-1', result: { output: `${subject} done`, metadata: {}, is_error: false } };
  };

  cancelTool = (_tenantId: string, _sessionId: string, callId: string): void => {
    this.cancelled.push(callId);
  };

  asClient(): ExecutorClient {
    return this as unknown as ExecutorClient;
  }
}

export const silentLogger = pino({ level: 'silent' });

export function testConfig(overrides: Partial<RunboxConfig> = {}): RunboxConfig {
  const config: Partial<RunboxConfig> = {
    RUNBOX_MODEL: 'test-model',
    RUNBOX_APPROVAL_TIMEOUT_SECONDS: 1800,
    RUNBOX_EXECUTOR_GRACE_MS: 15_000,
    RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: 180,
    RUNBOX_DELEGATE_MAX_DEPTH: 2,
    RUNBOX_RUN_LEASE_SECONDS: 30,
    RUNBOX_RUN_WORKERS: 4,
    RUNBOX_METRICS_TENANT_LABELS: 20,
    ...overrides,
  };
  return config as RunboxConfig;
}
