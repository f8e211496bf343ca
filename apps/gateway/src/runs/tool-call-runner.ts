import { posix } from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { ToolResult } from '@app/contracts';
import { MetricsService } from '../metrics/metrics.service';
import { ExecutorClient } from '../tools/executor.client';
import { InvalidToolArgumentsError, ToolInfrastructureError, ToolNotDispatchedError, ToolRouter } from '../tools/tool-router';
import { ToolRegistry } from '../tools/tool-registry';
import { toolCallWaitMs, toolTimeLimitSeconds } from '../tools/tool-time-limit';
import { abortableDelay, abortKind, raceAbort } from './run-abort';
import { isTransientInfrastructureError, RunContext, RunFailure, runToolDefinition } from './run-context';
import { RunEventsService } from './run-events.service';
import { NewEvent } from './run-tx';
import { CallFacts, callMutates, canonicalJson, decideCall, guardrailNote } from './tool-call-policy';
import { CallResult, ToolCallsRepository, ToolCallView } from './tool-calls.repository';

export const INTERRUPTED_RESULT =
  'interrupted: the gateway running this tool call stopped (a restart or a crash) before its result came back, so its outcome is unknown: it may or may not have taken effect. It was not run again. Check its effects (read the file, list the folder, look at the process) before repeating it.';

/** `resumed`: a sub-run call found running after its worker stopped, taken up again (it was started before). */
type Runnable = { call: ToolCallView; via: string; resumed?: boolean };

const WATCHDOG_FIRED = new Error('tool call watchdog');
/** The longest pause between tries to send a call, or store its result, while the database is away. */
const STORE_RETRY_MAX_MS = 1_000;

function raceWatchdog<T>(work: Promise<T>, watchdog: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    watchdog.addEventListener('abort', () => reject(WATCHDOG_FIRED), { once: true });
    work.then(resolve, reject);
  });
}

/**
 * Takes one model turn's tool calls from "the model asked" to "every call has a result".
 * Each call is judged first (offered, guardrails, permission rules, approval mode); the
 * ones allowed to run go concurrently, except that calls on the same file run in the order
 * the model made them. A call waiting for approval holds back later calls on its file.
 * Everything is read from and written to Postgres as it happens, so a worker that resumes
 * the run after a crash continues exactly where the last one stopped.
 */
@Injectable()
export class ToolCallRunner {
  constructor(
    private readonly toolCalls: ToolCallsRepository,
    private readonly events: RunEventsService,
    private readonly registry: ToolRegistry,
    private readonly tools: ToolRouter,
    private readonly executor: ExecutorClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * One pass over the turn's open calls. Returns `awaiting` when what is left can only go on
   * after an approval decision, `progress` otherwise (the caller looks again).
   */
  async pass(ctx: RunContext, turn: ToolCallView[]): Promise<'progress' | 'awaiting'> {
    const all = await this.toolCalls.all(ctx.run.tenantId, ctx.run.id);
    const keys = all.filter((c) => c.seq < turn[0].seq).map(callKey);
    const blocked = new Set<string>();
    const runnable: Runnable[] = [];
    for (const call of turn) {
      const order = this.orderingKey(ctx, call);
      const facts = this.facts(ctx, call);
      const earlierKeys = [...keys];
      keys.push(facts.key);
      switch (call.status) {
        case 'running':
          // We hold the run's claim, so nobody is running it now: its worker died mid-call.
          // A call that drives a sub-run picks the sub-run up where it stopped; any other
          // call's outcome is unknown, so it is reported and never run again.
          if (runToolDefinition(this.registry, ctx, call.name)?.drivesSubRun) runnable.push({ call, via: call.decision ?? 'auto', resumed: true });
          else await this.finish(ctx, call, { status: 'interrupted', output: INTERRUPTED_RESULT, isError: true, decision: call.decision ?? undefined });
          break;
        case 'denied':
          await this.finish(ctx, call, { status: 'refused', output: deniedResult(call), isError: true });
          break;
        case 'awaiting_approval':
          blocked.add(order);
          break;
        case 'approved':
          if (!blocked.has(order)) runnable.push({ call, via: 'approved' });
          break;
        case 'pending': {
          if (blocked.has(order)) break;
          const decision = decideCall(facts, {
            offered: ctx.offered,
            withheld: ctx.withheld,
            approvalMode: ctx.run.options.approval_mode ?? 'auto',
            permissions: ctx.run.options.permissions,
            approvalRequired: ctx.approvalRequired,
            hardStopAfter: ctx.limits.hardStopAfter,
            repeatLimit: ctx.limits.repeatLimit,
            earlierKeys,
          });
          if (decision.kind === 'refuse') {
            await this.finish(ctx, call, { status: 'refused', output: decision.message, isError: true, decision: decision.code, reason: decision.message });
          } else if (decision.kind === 'ask') {
            await this.askApproval(ctx, call, decision.reason);
            blocked.add(order);
          } else {
            runnable.push({ call, via: decision.via });
          }
          break;
        }
        default:
          break;
      }
    }
    await this.runAll(ctx, runnable);
    return blocked.size > 0 ? 'awaiting' : 'progress';
  }

  private async askApproval(ctx: RunContext, call: ToolCallView, reason: string): Promise<void> {
    const seconds = ctx.limits.approvalTimeoutSeconds ?? this.config.RUNBOX_APPROVAL_TIMEOUT_SECONDS;
    const expiresAt = new Date(Date.now() + seconds * 1000);
    const seqs = await this.toolCalls.markAwaiting(ctx.run.tenantId, ctx.run.id, call.callId, expiresAt, reason, {
      type: 'tool_call.approval_required',
      data: { tool_call_id: call.callId, name: call.name, arguments: call.arguments, reason, expires_at: expiresAt.toISOString() },
    });
    this.events.announce(ctx.run.id, seqs);
  }

  /** Runs calls concurrently; calls with the same ordering key (one file) wait for each other. */
  private async runAll(ctx: RunContext, runnable: Runnable[]): Promise<void> {
    const chains = new Map<string, Promise<void>>();
    const all: Array<Promise<void>> = [];
    for (const item of runnable) {
      const key = this.orderingKey(ctx, item.call);
      const next = (chains.get(key) ?? Promise.resolve()).then(() => this.runOne(ctx, item));
      chains.set(key, next.catch(() => undefined));
      all.push(next);
    }
    const results = await Promise.allSettled(all);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
  }

  private async runOne(ctx: RunContext, { call, via, resumed }: Runnable): Promise<void> {
    const { run } = ctx;
    if (ctx.signal.aborted) throw ctx.signal.reason;
    if (!resumed) {
      const seqs = await this.toolCalls.markStarted(run.tenantId, run.id, call.callId, via, {
        type: 'tool_call.started',
        data: { tool_call_id: call.callId, name: call.name, arguments: call.arguments },
      });
      if (!seqs) return; // finished meanwhile (the run was cancelled)
      this.events.announce(run.id, seqs);
    }
    const timed = this.metrics.timeToolCall(this.toolLabel(call));
    let result: ToolResult;
    try {
      result = await this.execute(ctx, call);
    } catch (err) {
      timed('failed');
      throw err;
    }
    timed(result.is_error ? 'error' : 'ok');
    await this.storeResult(ctx, () =>
      this.finish(ctx, call, {
        status: result.is_error ? 'failed' : 'completed',
        // Budgeted once where it was produced (ToolDispatcher, the sandbox agent): cutting
        // again here would cut the notes that say what was cut.
        output: result.output,
        isError: result.is_error,
        metadata: result.metadata,
      }),
    );
  }

  /**
   * Sends the call, and sends it again while it could not leave because the database was
   * away (nothing ran, so that is safe), until the run stops, another worker takes the run
   * over, or the watchdog gives up on the call.
   */
  private async sendUntilDispatched<T>(ctx: RunContext, watchdog: AbortSignal, send: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await send();
      } catch (err) {
        if (!(err instanceof ToolNotDispatchedError) || ctx.signal.aborted || watchdog.aborted) throw err;
        if (attempt === 0) ctx.log.warn({ err }, 'the database is away; the tool call waits to be sent');
        await abortableDelay(Math.min(STORE_RETRY_MAX_MS, 100 * 2 ** attempt), ctx.signal);
        // While the database is still away the claim cannot be checked; it is once it answers.
        if (ctx.holdClaim && !(await ctx.holdClaim().catch(() => true))) throw ctx.signal.reason;
      }
    }
  }

  /**
   * Stores the result of a call that ran. Postgres restarting while the call ran must not
   * lose it: the call would then be reported as interrupted, its outcome unknown, though it
   * finished. So the write is tried again while the database is away, and before each new
   * try the run's claim is renewed: a worker whose run was taken over meanwhile writes
   * nothing (its signal is aborted). It waits as long as the database does; nothing else of
   * the run can go on meanwhile anyway.
   */
  private async storeResult(ctx: RunContext, write: () => Promise<void>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt > 0 && ctx.holdClaim && !(await ctx.holdClaim())) throw ctx.signal.reason;
        return await write();
      } catch (err) {
        if (ctx.signal.aborted) throw ctx.signal.reason;
        if (!isTransientInfrastructureError(err)) throw err;
        if (attempt === 0) ctx.log.warn({ err }, 'the database is away; keeping the tool result until it can be stored');
        await abortableDelay(Math.min(STORE_RETRY_MAX_MS, 100 * 2 ** attempt), ctx.signal);
      }
    }
  }

  /** The tool's result; infrastructure trouble that the model can reason about becomes an error result. */
  private async execute(ctx: RunContext, call: ToolCallView, afterLoss = false): Promise<ToolResult> {
    const { run } = ctx;
    const executorCallId = `${run.id}:${call.callId}`;
    const watchdog = new AbortController();
    // A sub-run is bounded by its own limits (tool timeouts, hard stop, approval timeout)
    // and may wait for a person, so no watchdog is put on the call that drives it.
    const timer = runToolDefinition(this.registry, ctx, call.name)?.drivesSubRun ? undefined : setTimeout(() => watchdog.abort(), this.watchdogMs(ctx, call));
    try {
      const work = this.sendUntilDispatched(ctx, watchdog.signal, () =>
        this.tools.execute(
          {
            tenantId: run.tenantId,
            sessionId: run.sessionId,
            executorId: ctx.executorId,
            callId: executorCallId,
            toolCallId: call.callId,
            runId: run.id,
            memoryScope: run.options.memory_scope ?? null,
            maxOutputChars: ctx.limits.maxOutputChars,
            timeouts: ctx.limits.timeouts,
            signal: ctx.signal,
            tenantTools: ctx.tenantTools,
          },
          call.name,
          call.arguments,
        ),
      );
      const result = await raceWatchdog(raceAbort(work, ctx.signal), watchdog.signal);
      if (result.executorId) ctx.executorId = result.executorId;
      return result;
    } catch (err) {
      if (ctx.signal.aborted) {
        // A cancel stops the command in the sandbox; a shutdown leaves it to finish there.
        if (abortKind(ctx.signal) === 'cancel') this.executor.cancelTool(run.tenantId, run.sessionId, executorCallId);
        throw err;
      }
      if (err === WATCHDOG_FIRED) {
        return { output: `error: ${call.name} gave no result within its time limit; it may or may not have taken effect. Check before repeating it.`, metadata: { outcome_unknown: true }, is_error: true };
      }
      if (err instanceof InvalidToolArgumentsError) return { output: `refused: ${err.message}`, metadata: {}, is_error: true };
      if (err instanceof ToolInfrastructureError && err.lostExecutorId && !afterLoss && this.config.RUNBOX_ON_EXECUTOR_LOSS === 'recreate') {
        return this.outlastExecutorLoss(ctx, call, err, err.lostExecutorId);
      }
      if (err instanceof ToolInfrastructureError) {
        // A sandbox that died or cannot start, no executor, or one that took the call and
        // never answered: the run cannot go on normally, so it ends failed with the reason
        // rather than letting the model guess. An unanswered call is never re-sent (it may
        // have run), and the message says to check its effects.
        if (err.outcomeUnknown) throw new RunFailure(`tool ${call.name} got no answer: ${err.message}; check its effects before running it again`);
        const retry = err.retryAfterSeconds === undefined ? '' : ` (temporary: the run can be retried in ${err.retryAfterSeconds} s)`;
        throw new RunFailure(`tool ${call.name} could not run: ${err.message}${retry}`);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Under RUNBOX_ON_EXECUTOR_LOSS=recreate a run outlives its executor: it waits, bounded by
   * the loss grace, for the executor to come back or be given up. A call that never left
   * is then sent again (to the executor back with the workspace, or to a new sandbox with
   * the note that the workspace was lost). A call that was in flight is never sent again (it
   * may have run): once the executor is given up, the model hears that the call's outcome
   * and the whole workspace are lost, and the run goes on in a new sandbox; if the executor
   * came back instead, its outcome is unknown and the run ends as under `fail`.
   */
  private async outlastExecutorLoss(ctx: RunContext, call: ToolCallView, err: ToolInfrastructureError, executorId: string): Promise<ToolResult> {
    ctx.log.warn({ executorId, reason: err.message }, 'the session\'s executor is lost; waiting for it to come back or be given up');
    const fate = await this.executor.settleLoss(executorId, ctx.signal);
    if (!err.outcomeUnknown) return this.execute(ctx, call, true);
    if (fate === 'serving') throw new RunFailure(`tool ${call.name} got no answer: ${err.message}; check its effects before running it again`);
    return {
      output:
        `error: ${call.name} got no answer: ${err.message}. The executor did not come back, and this session's workspace was lost with it, ` +
        'together with whatever this call did there. The next call runs in a new, empty sandbox: files and state from before are gone.',
      metadata: { outcome_unknown: true, workspace_lost: true },
      is_error: true,
    };
  }

  /**
   * The longest a call may take before the run stops waiting for it: the limit the
   * router gives the tool, plus a margin, and what the executor client waits on top of a
   * limit (the sandbox's start and the executor's grace). Sandbox calls time out on their
   * own before this; it bounds any tool that does not, so a run is never stuck on one call.
   */
  private watchdogMs(ctx: RunContext, call: ToolCallView): number {
    const seconds = toolTimeLimitSeconds(call.name, runToolDefinition(this.registry, ctx, call.name), call.arguments, ctx.limits.timeouts);
    return toolCallWaitMs(this.config, (seconds + 5) * 1000);
  }

  /**
   * Stores a call's result, however it ended (ran, refused, denied, interrupted). The call
   * that reaches warn_after or hard_stop_after carries the guardrail note whatever its
   * outcome, so the model is warned even when that call was refused.
   */
  private async finish(ctx: RunContext, call: ToolCallView, result: CallResult): Promise<void> {
    const note = guardrailNote(call.seq, ctx.limits.warnAfter, ctx.limits.hardStopAfter);
    const output = note ? `${result.output}\n\n${note.text}` : result.output;
    const events: NewEvent[] = [
      {
        type: 'tool_call.completed',
        data: { tool_call_id: call.callId, name: call.name, status: result.status, output, is_error: result.isError, metadata: result.metadata ?? {} },
      },
    ];
    if (note) {
      events.push({
        type: 'guardrail.warning',
        data: { kind: note.kind, tool_calls: call.seq, warn_after: ctx.limits.warnAfter, hard_stop_after: ctx.limits.hardStopAfter, message: note.text },
      });
    }
    const seqs = await this.toolCalls.finish(ctx.run.tenantId, ctx.run, call.callId, { ...result, output }, events);
    this.events.announce(ctx.run.id, seqs);
    this.metrics.toolCallEnded(ctx.run.tenantId, this.toolLabel(call), result.status);
  }

  /** A registered tool's name; whatever else a model called counts as `unknown`, so labels stay bounded. */
  private toolLabel(call: ToolCallView): string {
    return this.registry.get(call.name) ? call.name : 'unknown';
  }

  private facts(ctx: RunContext, call: ToolCallView): CallFacts {
    const tool = runToolDefinition(this.registry, ctx, call.name);
    const args = call.arguments;
    let argumentProblem: string | undefined;
    let parsed: Record<string, unknown> | undefined;
    if (isUnparsed(args)) {
      argumentProblem =
        typeof args._problem === 'string'
          ? `the arguments for ${call.name} hold text no tool can take (${args._problem})`
          : `the arguments for ${call.name} are not valid JSON; send a JSON object`;
    } else if (tool) {
      try {
        parsed = this.tools.parseArguments(call.name, args, tool);
      } catch (err) {
        if (!(err instanceof InvalidToolArgumentsError)) throw err;
        argumentProblem = err.message;
      }
    }
    return {
      seq: call.seq,
      name: call.name,
      argumentProblem,
      key: callKey(call),
      mutating: callMutates(tool, parsed),
      subject: ruleSubject(tool?.pathArgument, args),
      isShell: call.name === 'terminal',
    };
  }

  private orderingKey(ctx: RunContext, call: ToolCallView): string {
    return callOrderingKey(call, runToolDefinition(this.registry, ctx, call.name)?.pathArgument);
  }
}

/** Calls on one file share a key and run in order; every other call (a terminal command, say) has its own. */
export function callOrderingKey(call: Pick<ToolCallView, 'callId' | 'arguments'>, pathArgument: string | undefined): string {
  const args = call.arguments as Record<string, unknown> | null;
  const path = pathArgument && args && typeof args[pathArgument] === 'string' ? normalizePath(args[pathArgument] as string) : undefined;
  return path !== undefined ? `file:${path}` : `call:${call.callId}`;
}

export function callKey(call: Pick<ToolCallView, 'name' | 'arguments'>): string {
  return `${call.name}:${canonicalJson(call.arguments)}`;
}

/** Arguments RunLoop kept as text (`_raw`), with why they could not be taken (`_problem`) when not "not JSON". */
function isUnparsed(args: unknown): args is { _raw: unknown; _problem?: unknown } {
  if (!args || typeof args !== 'object' || Array.isArray(args) || !('_raw' in args)) return false;
  return Object.keys(args).every((k) => k === '_raw' || k === '_problem');
}

/** What a `tool(pattern)` permission rule is matched against: the path, command or url. */
function ruleSubject(pathArgument: string | undefined, args: unknown): string | undefined {
  if (!args || typeof args !== 'object') return undefined;
  const a = args as Record<string, unknown>;
  if (pathArgument && typeof a[pathArgument] === 'string') return normalizePath(a[pathArgument] as string);
  for (const name of ['command', 'url', 'path', 'query']) if (typeof a[name] === 'string') return a[name] as string;
  return undefined;
}

/** Lexically normalised, so `./a`, `a//b`, `a/./b`, `x/../a` and `/workspace/a` are one file. */
export function normalizePath(path: string): string {
  return posix.normalize(path).replace(/^\/workspace(\/|$)/, '').replace(/^\.\//, '');
}

function deniedResult(call: ToolCallView): string {
  if (call.decision === 'timed_out') return `denied: ${call.reason ?? 'nobody decided on this call in time'}, so nothing ran.`;
  return `denied: the approver refused this call${call.reason ? ` (reason: ${call.reason})` : ''}, so nothing ran.`;
}
