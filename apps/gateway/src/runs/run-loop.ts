import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER, withRequestId } from '@app/logging';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { findUnstorableText, toStorableText } from '../common/storable-text';
import { MetricsService } from '../metrics/metrics.service';
import { ModelError, MODEL_PROVIDER, ModelProvider, ModelResponse, ModelToolSpec } from '../models/model-provider';
import { MessageView, SessionsRepository } from '../sessions/sessions.repository';
import { TenantToolSet } from '../tools/tenant-tools';
import { ToolRegistry } from '../tools/tool-registry';
import { abortableDelay, raceAbort } from './run-abort';
import { isTransientInfrastructureError, RunContext, RunFailure, RunUsage, usageFrom, wallMs } from './run-context';
import { RunControlService } from './run-control.service';
import { RunEnqueuer } from './run-enqueuer';
import { RunEventsService } from './run-events.service';
import { toModelMessages } from './run-history';
import { RunDefaultsRepository } from './run-defaults.repository';
import { effectiveLimits } from './run-options';
import { runToolsJson, RunToolSelection, RunToolsWithTenant } from './run-tools';
import { RunMessagesRepository } from './run-messages.repository';
import { RunsRepository, RunView } from './runs.repository';
import { TextDeltaBuffer } from './text-delta-buffer';
import { ToolCallRunner } from './tool-call-runner';
import { OPEN_CALL_STATUSES, ToolCallsRepository } from './tool-calls.repository';

const MODEL_ATTEMPTS = 3;
/** A worker taken over this many times (gateway crashes mid-run) gives the run up as failed. */
export const MAX_RECOVERIES = 5;
/** Model turns begun after the hard stop that may still ask for tools (all refused) before the run is stopped. */
const TURNS_AFTER_HARD_STOP = 2;

/** How a worker's time with a run ended. */
export type RunOutcome =
  | 'finished' // completed, failed or cancelled
  | 'parked' // waiting for an approval; resumed by the decision
  | 'waiting' // queued behind an earlier run of its session
  | 'aborted'; // this worker stopped (cancel, shutdown, lost claim)

export interface ExecuteOptions {
  /** The previous worker died holding the run. */
  recovered?: boolean;
  recoveries?: number;
  /** This worker goes on after Postgres or NATS was away (the run.resumed reason `infrastructure`). */
  afterOutage?: boolean;
  /** See RunContext.holdClaim. */
  holdClaim?: () => Promise<boolean>;
  /** The worker's claim: a queued run's start takes the lease with it (RunLeasesRepository.claim only read it). */
  lease?: { owner: string; ms: number };
  /** The tenant's tools of a session (the run's, if the queue message was right), listed while the run was claimed. */
  tenantTools?: { sessionId: string; listing: Promise<TenantToolSet> };
}

/**
 * The agent loop: model call → tool calls → results → model, until the model answers
 * without tools or something stops the run. It works from what Postgres says: each step
 * reads the run's stored state and writes its result before the next, so any worker can
 * pick a run up where another left it. Sub-runs (delegate_task) use the same loop with
 * `parentRunId` set.
 */
@Injectable()
export class RunLoop {
  constructor(
    private readonly runs: RunsRepository,
    private readonly messages: RunMessagesRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly sessions: SessionsRepository,
    private readonly events: RunEventsService,
    private readonly registry: ToolRegistry,
    private readonly runner: ToolCallRunner,
    private readonly enqueuer: RunEnqueuer,
    private readonly control: RunControlService,
    private readonly toolSelection: RunToolSelection,
    private readonly tenantDefaults: RunDefaultsRepository,
    @Inject(MODEL_PROVIDER) private readonly model: ModelProvider,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * Executes (or resumes) a run this worker has claimed, until it ends or has to wait, under
   * the correlation id of the request that made it: its log lines and executor calls carry it.
   */
  execute(run: RunView, signal: AbortSignal, options: ExecuteOptions = {}): Promise<RunOutcome> {
    return withRequestId(run.requestId, () => this.executeClaimed(run, signal, options));
  }

  private async executeClaimed(run: RunView, signal: AbortSignal, options: ExecuteOptions): Promise<RunOutcome> {
    const log = this.logger.child({ tenantId: run.tenantId, runId: run.id, sessionId: run.sessionId });
    const { tenantId } = run;
    // Counted from what earlier workers stored; the context updates this same object.
    const usage = usageFrom(run.usage);
    try {
      const listed = options.tenantTools?.sessionId === run.sessionId ? options.tenantTools.listing : undefined;
      const tools = await this.toolSelection.withTenantTools(run, signal, listed);
      // Read beside the start (on the system pool) rather than after it. A run that does not
      // go on never reads it, so its failure is observed only where it is awaited.
      const approvalRequired = this.tenantDefaults.approvalRequired(tenantId);
      approvalRequired.catch(() => undefined);
      let executorId: string | null;
      let justStarted = false;
      let firstContext: MessageView[] | undefined;
      if (run.status === 'queued') {
        const started = await this.runs.start(tenantId, run, runToolsJson(tools), this.config.RUNBOX_CONTEXT_BUDGET_CHARS, options.lease);
        if (started.kind === 'waiting') return 'waiting';
        if (started.kind === 'not_queued') return 'finished';
        this.metrics.runStarted(run.createdAt);
        this.events.announce(run.id, started.seqs);
        executorId = started.executorId;
        firstContext = started.context;
        justStarted = true;
      } else {
        if (run.status === 'requires_approval' && !(await this.runs.resumeAfterApproval(tenantId, run.id))) return 'parked';
        if ((options.recoveries ?? 0) > MAX_RECOVERIES) {
          throw new RunFailure(`the run lost its worker ${options.recoveries} times (gateway crashes or restarts); it was given up`);
        }
        const reason = run.status === 'requires_approval' ? 'approval' : options.recovered ? 'worker_lost' : options.afterOutage ? 'infrastructure' : 'requeued';
        await this.events.emit(tenantId, run.id, { type: 'run.resumed', data: { reason, recoveries: options.recoveries ?? 0 } });
        if (options.recovered) log.warn({ recoveries: options.recoveries }, 'resuming a run whose worker stopped');
        executorId = (await this.sessions.find(tenantId, run.sessionId))?.executorId ?? null;
      }
      const ctx: RunContext = {
        run,
        signal,
        offered: tools.offered,
        withheld: tools.withheld,
        tenantTools: tools.tenantTools,
        reportedProblems: new Set(),
        limits: effectiveLimits(run.options),
        approvalRequired: await approvalRequired,
        executorId,
        usage,
        log,
        holdClaim: options.holdClaim,
      };
      await this.reportToolProblems(ctx, tools.problems);
      return await this.drive(ctx, justStarted, firstContext);
    } catch (err) {
      if (signal.aborted) return 'aborted';
      // A readable failure ends the run even when it quotes a connection error: that text
      // comes from the provider or the sandbox, not from Runbox's own database or NATS.
      const readable = err instanceof RunFailure || err instanceof ModelError;
      if (!readable && isTransientInfrastructureError(err)) throw err; // the queue retries the run later
      // A provider's error text is quoted as it came, so it too may hold NUL.
      const message = readable ? toStorableText(err.message) : 'internal error while running';
      if (!readable) log.error({ err }, 'run crashed');
      else log.warn({ error: message }, 'run failed');
      await this.fail(run, message, usage);
      return 'finished';
    }
  }

  /**
   * `justStarted`: this worker has just started the run, so it has no answer and no call
   * yet, and its first turn goes straight to the model without reading them back, with
   * `firstContext` (read as the run started) as its conversation.
   */
  private async drive(ctx: RunContext, justStarted: boolean, firstContext?: MessageView[]): Promise<RunOutcome> {
    const { run } = ctx;
    for (let first = justStarted; ; first = false) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      const answer = first ? null : await this.messages.lastAnswer(run.tenantId, run.id);
      if (answer && !answer.hasToolCalls) return this.complete(ctx, answer.content ?? '');
      const turn = answer ? await this.toolCalls.latestTurn(run.tenantId, run.id) : [];
      if (turn.some((c) => OPEN_CALL_STATUSES.includes(c.status))) {
        const pass = await this.runner.pass(ctx, turn);
        if (pass === 'awaiting' && (await this.runs.park(run.tenantId, run.id))) {
          const waiting = await this.toolCalls.awaiting(run.tenantId, run.id);
          await this.events.emit(run.tenantId, run.id, { type: 'run.requires_approval', data: { tool_call_ids: waiting.map((c) => c.callId) } });
          return 'parked';
        }
        continue;
      }
      if (!first) await this.checkHardStop(ctx);
      if (answer) await this.refreshTenantTools(ctx);
      const response = await this.callModel(ctx, first ? firstContext : undefined);
      if (response.toolCalls.length === 0) {
        const ended = await this.completeWithAnswer(ctx, response);
        if (ended) return ended;
      }
      await this.recordAnswer(ctx, response);
    }
  }

  /**
   * Lists the tenant's own tools again before a model turn (the first turn uses the listing
   * the run started with): a server whose tool list changed, or that failed or recovered,
   * takes effect from this turn. Built-in tools stay as they were chosen.
   */
  private async refreshTenantTools(ctx: RunContext): Promise<void> {
    const fresh = await this.toolSelection.withTenantTools(ctx.run, ctx.signal);
    ctx.offered = fresh.offered;
    ctx.tenantTools = fresh.tenantTools;
    // Listing a stdio MCP server starts it in the session's sandbox, which makes the sandbox
    // when there was none: the run's sandbox calls then go to the executor that holds it.
    if (!ctx.executorId) ctx.executorId = (await this.sessions.toolRoute(ctx.run.tenantId, ctx.run.sessionId))?.executorId ?? null;
    await this.reportToolProblems(ctx, fresh.problems);
  }

  /** A tool source that failed is reported once per run (a run event), then skipped. */
  private async reportToolProblems(ctx: RunContext, problems: RunToolsWithTenant['problems']): Promise<void> {
    for (const problem of problems) {
      if (ctx.reportedProblems.has(problem.key)) continue;
      ctx.reportedProblems.add(problem.key);
      await this.events.emit(ctx.run.tenantId, ctx.run.id, problem.event);
    }
  }

  /** A model that keeps asking for tools after the hard stop is stopped rather than looping. */
  private async checkHardStop(ctx: RunContext): Promise<void> {
    const calls = await this.toolCalls.all(ctx.run.tenantId, ctx.run.id);
    ctx.usage.tool_calls = calls.length;
    // Turns that began after the stop: the model was offered no tools and asked anyway.
    const firstSeqOfTurn = new Map<number, number>();
    for (const c of calls) if (!firstSeqOfTurn.has(c.turn)) firstSeqOfTurn.set(c.turn, c.seq);
    const lateTurns = [...firstSeqOfTurn.values()].filter((seq) => seq > ctx.limits.hardStopAfter).length;
    if (lateTurns >= TURNS_AFTER_HARD_STOP) {
      throw new RunFailure(
        `the model kept calling tools after the run's limit of ${ctx.limits.hardStopAfter} tool calls (hard_stop_after) instead of answering; the run was stopped`,
      );
    }
  }

  private async callModel(ctx: RunContext, context?: MessageView[]): Promise<ModelResponse> {
    const { run } = ctx;
    const model = run.options.model ?? this.config.RUNBOX_MODEL;
    if (!model) throw new RunFailure('no model given: set "model" on the run or RUNBOX_MODEL');
    const manifest: ModelToolSpec[] = [
      ...this.registry.manifest(ctx.offered).map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })),
      ...[...ctx.tenantTools.values()].map((t) => ({ name: t.definition.name, description: t.definition.description, parameters: t.inputSchema })),
    ];
    // Past the hard stop the model is offered no tools, so it can only answer.
    const tools = ctx.usage.tool_calls >= ctx.limits.hardStopAfter ? [] : manifest;
    const system = run.options.system !== undefined ? expandSystem(run.options.system, manifest) : undefined;
    const messages = toModelMessages(context ?? (await this.messages.modelContext(run.tenantId, run, this.config.RUNBOX_CONTEXT_BUDGET_CHARS)));
    let lastError: ModelError | undefined;
    for (let attempt = 1; attempt <= MODEL_ATTEMPTS; attempt++) {
      const deltas = new TextDeltaBuffer((text) =>
        this.events.emit(run.tenantId, run.id, { type: 'message.delta', data: { role: 'assistant', text: toStorableText(text) } }),
      );
      try {
        ctx.usage.model_calls++;
        const response = await raceAbort(
          this.model.complete({ model, system, messages, tools, signal: ctx.signal, onTextDelta: (t) => deltas.push(t) }),
          ctx.signal,
        );
        await deltas.flush();
        ctx.usage.input_tokens += response.usage.inputTokens;
        ctx.usage.output_tokens += response.usage.outputTokens;
        return response;
      } catch (err) {
        await deltas.flush().catch(() => undefined);
        if (ctx.signal.aborted) throw ctx.signal.reason;
        if (!(err instanceof ModelError) || !err.retryable || attempt === MODEL_ATTEMPTS) throw err;
        lastError = err;
        ctx.log.warn({ attempt, error: err.message }, 'model call failed; trying again');
        await abortableDelay(500 * 2 ** (attempt - 1), ctx.signal);
      }
    }
    throw lastError ?? new RunFailure('the model call failed');
  }

  /**
   * Stores the model's answer with a pending row per tool call (ids made unique within the
   * run). What the model wrote is kept, except text Postgres cannot hold (NUL, lone
   * surrogates), which becomes U+FFFD; arguments that decode to such text are judged invalid.
   */
  private async recordAnswer(ctx: RunContext, model: ModelResponse): Promise<void> {
    const { run } = ctx;
    const response = storableResponse(model);
    const used = new Set((await this.toolCalls.all(run.tenantId, run.id)).map((c) => c.callId));
    const rawCalls = response.toolCalls.map((c) => {
      // Some models reuse ids across turns or leave them empty; the run needs them unique.
      const id = c.id && c.id.length <= 100 && !used.has(c.id) ? c.id : `call_${randomBytes(9).toString('hex')}`;
      used.add(id);
      return { id, name: c.name, arguments: c.arguments };
    });
    const storedCalls = rawCalls.map((c) => ({ ...c, arguments: toStorableText(c.arguments) }));
    ctx.usage.tool_calls += rawCalls.length;
    const seqs = await this.toolCalls.recordTurn(
      run.tenantId,
      run,
      {
        content: response.content,
        rawCalls: storedCalls,
        toolCalls: rawCalls.map((c) => ({ callId: c.id, name: c.name, arguments: parseArguments(c.arguments) })),
      },
      () => [
        {
          type: 'message.created',
          data: { role: 'assistant', content: response.content, tool_calls: storedCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) },
        },
      ],
      { ...ctx.usage },
    );
    this.events.announce(run.id, seqs);
  }

  private async complete(ctx: RunContext, output: string): Promise<RunOutcome> {
    const { run } = ctx;
    const usage = await this.finalUsage(ctx.usage, run);
    const done = await this.runs.finish(
      run.tenantId,
      run,
      ['running'],
      'completed',
      { output, usage: (startedAt, now) => ({ ...usage, wall_ms: wallMs(startedAt, now) }) },
      { type: 'run.completed', data: { output, usage } },
      { status: 'failed', output: 'no result: the run ended before this tool call ran.', isError: true },
    );
    if (done) {
      this.events.announce(run.id, done.seqs);
      this.metrics.runEnded(run.tenantId, 'completed', done.startedAt, done.endedAt);
      ctx.log.info({ toolCalls: usage.tool_calls }, 'run completed');
      await this.afterEnd(run);
    }
    return 'finished';
  }

  /**
   * A final answer (no tool calls) stored and the run completed in one transaction, which
   * is what `recordAnswer` and then `complete` would write. Undefined, with nothing
   * written, when the run is not running any more: the step-by-step path then finds out why.
   */
  private async completeWithAnswer(ctx: RunContext, model: ModelResponse): Promise<RunOutcome | undefined> {
    const { run } = ctx;
    const { content } = storableResponse(model);
    const output = content ?? '';
    const usage = { ...ctx.usage };
    const done = await this.runs.completeWithAnswer(run.tenantId, run, { content, output }, { event: usage, stored: (startedAt, now) => ({ ...usage, wall_ms: wallMs(startedAt, now) }) });
    if (!done) return undefined;
    this.events.announce(run.id, done.seqs);
    this.metrics.runEnded(run.tenantId, 'completed', done.startedAt, done.endedAt);
    ctx.log.info({ toolCalls: usage.tool_calls }, 'run completed');
    if (done.nextQueuedRunId) await this.enqueuer.enqueue(run.tenantId, done.nextQueuedRunId, 'session_free', run.sessionId);
    return 'finished';
  }

  private async fail(run: RunView, message: string, usage: RunUsage): Promise<void> {
    const done = await this.runs.finish(
      run.tenantId,
      run,
      ['queued', 'running', 'requires_approval'],
      'failed',
      { error: message, usage: (startedAt, now) => ({ ...usage, wall_ms: wallMs(startedAt, now) }) },
      { type: 'run.failed', data: { error: message } },
      { status: 'failed', output: `failed: the run ended (${message}) before this tool call finished.`, isError: true },
    );
    if (done) {
      this.events.announce(run.id, done.seqs);
      this.metrics.runEnded(run.tenantId, 'failed', done.startedAt, done.endedAt);
      // Sub-runs left behind (the run gave up after crashes, say) end with it.
      await this.control.cancelSubRuns(run.tenantId, run.id);
      await this.afterEnd(run);
    }
  }

  private async finalUsage(usage: RunUsage, run: RunView): Promise<RunUsage> {
    const calls = await this.toolCalls.all(run.tenantId, run.id);
    return { ...usage, tool_calls: calls.length };
  }

  /** A run's end frees its session for the next queued run. */
  private async afterEnd(run: RunView): Promise<void> {
    if (!run.parentRunId) await this.enqueuer.startNextInSession(run.tenantId, run.sessionId);
  }
}

/**
 * `{{tools}}` in the run's system text becomes the manifest of the tools it may use, one
 * `- name: description` line each. Nothing else is ever added to the system text.
 */
export function expandSystem(system: string, tools: Array<{ name: string; description: string }>): string {
  if (!system.includes('{{tools}}')) return system;
  const manifest = tools.length > 0 ? tools.map((t) => `- ${t.name}: ${t.description}`).join('\n') : '(no tools)';
  return system.split('{{tools}}').join(manifest);
}

function storableResponse(response: ModelResponse): ModelResponse {
  return {
    ...response,
    content: response.content === null ? null : toStorableText(response.content),
    // Arguments are judged as written (parseArguments), then kept storable in rawCalls.
    toolCalls: response.toolCalls.map((c) => ({ ...c, id: toStorableText(c.id), name: toStorableText(c.name) })),
  };
}

/**
 * The arguments as a value, or `{_raw: text}` when they are not JSON, with `_problem` when
 * they hold text no tool can take (NUL or a lone surrogate, raw or as an escape). Either
 * way the call is refused when judged, and the text is kept (as U+FFFD where unstorable).
 */
function parseArguments(text: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text || '{}');
  } catch {
    return { _raw: toStorableText(text) };
  }
  const unstorable = findUnstorableText(parsed, 'arguments');
  return unstorable ? { _raw: toStorableText(text), _problem: `${unstorable.field}: ${unstorable.message}` } : parsed;
}
