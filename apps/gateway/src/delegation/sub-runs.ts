import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { MetricsService } from '../metrics/metrics.service';
import { RunEventsService } from '../runs/run-events.service';
import { RunWorkers } from '../runs/run-workers';
import { DELEGATE_TASK, depthLimitReason, RunToolSelection } from '../runs/run-tools';
import { NewEvent } from '../runs/run-tx';
import { isTerminal } from '../runs/run-status';
import { RunsRepository, RunView } from '../runs/runs.repository';
import { SubRunsRepository } from '../runs/sub-runs.repository';
import { ToolCallsRepository } from '../runs/tool-calls.repository';
import { GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { ToolRegistry, ToolsetChoice } from '../tools/tool-registry';
import { subRunOptions, subRunTools } from './sub-run-options';

/** How often a parent waiting on its sub-run looks again when no event woke it. */
const RECHECK_MS = 2_000;

export interface DelegateRequest {
  task: string;
  toolset?: ToolsetChoice;
  tools?: string[];
}

/**
 * Runs a delegate_task call: a sub-run in the parent's session with a fresh context and the
 * parent's tools or fewer, executed in the parent's worker until it ends, whose final
 * answer (or failure) becomes the call's result. Everything lives in Postgres: a parent
 * resumed after a crash finds the same sub-run (one per call) and continues following it.
 */
@Injectable()
export class SubRuns {
  constructor(
    private readonly runs: RunsRepository,
    private readonly subRuns: SubRunsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly events: RunEventsService,
    private readonly workers: RunWorkers,
    private readonly toolSelection: RunToolSelection,
    private readonly registry: ToolRegistry,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly metrics: MetricsService,
  ) {}

  async delegate(ctx: GatewayToolContext, request: DelegateRequest): Promise<GatewayToolResult> {
    const { tenantId } = ctx;
    if (!ctx.runId || !ctx.toolCallId) {
      return toolFailure(`${DELEGATE_TASK} starts a sub-agent for a run, so it only works inside one: start a run with POST /v1/runs instead.`);
    }
    const parent = await this.runs.find(tenantId, ctx.runId);
    if (!parent) return toolFailure(`refused: run ${ctx.runId} is gone, so no sub-agent was started.`);
    const maxDepth = this.config.RUNBOX_DELEGATE_MAX_DEPTH;
    if (parent.depth >= maxDepth) return toolFailure(`refused: ${depthLimitReason(parent.depth, maxDepth)}. Nothing ran.`);

    const tools = subRunTools(this.toolSelection.forRun(parent).offered, {
      toolset: request.toolset ? this.registry.toolset(request.toolset) : undefined,
      tools: request.tools,
    });
    const outcome = await this.subRuns.createSubRun(tenantId, {
      parent,
      parentCallId: ctx.toolCallId,
      input: request.task,
      options: subRunOptions(parent.options, tools),
      parentEvents: (subRunId) => [{ type: 'subrun.started', data: { tool_call_id: ctx.toolCallId, subrun_id: subRunId, depth: parent.depth + 1, tools } }],
    });
    if (outcome.kind === 'parent_ended') return toolFailure('cancelled: the run ended before its sub-agent started.');
    const sub = outcome.run;
    if (outcome.kind === 'created') {
      this.metrics.runCreated(tenantId);
      this.events.announce(sub.id, [1]);
      this.events.announce(parent.id, outcome.parentSeqs);
      this.logger.info({ tenantId, runId: parent.id, subRunId: sub.id, depth: sub.depth, tools }, 'sub-run started');
    } else {
      this.logger.info({ tenantId, runId: parent.id, subRunId: sub.id }, 'following a sub-run again after the parent resumed');
    }
    const signal = ctx.signal ?? new AbortController().signal;
    return resultOf(await this.follow(parent, sub.id, signal));
  }

  /**
   * Drives the sub-run to its end. It runs here, in the parent's worker. While it waits for
   * an approval, the parent (and every run above it) is shown waiting too: status
   * `requires_approval`, with events naming the sub-run's calls. Once the decisions are in,
   * it goes on here, or, if another worker took it up first (a decided approval also puts
   * the sub-run on the queue), the parent waits for that worker to finish it.
   */
  private async follow(parent: RunView, subRunId: string, signal: AbortSignal): Promise<RunView> {
    const { tenantId } = parent;
    let holding = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const sub = await this.runs.find(tenantId, subRunId);
      if (!sub) throw new Error(`sub-run ${subRunId} disappeared`);
      const waitingForPerson = sub.status === 'requires_approval';
      if (waitingForPerson && !holding) await this.holdAncestors(parent, sub.id);
      if (!waitingForPerson && holding) await this.releaseAncestors(parent, sub.id);
      holding = waitingForPerson;
      if (isTerminal(sub.status)) return sub;
      // A sub-run waiting on its own undecided calls has nothing to do until a decision.
      const runnable = !waitingForPerson || (await this.toolCalls.awaiting(tenantId, sub.id)).length === 0;
      if (runnable) {
        const outcome = await this.workers.executeInline(tenantId, sub.id, signal);
        if (outcome === 'finished' || outcome === 'parked') continue;
        if (outcome === 'aborted' && isTerminal((await this.runs.find(tenantId, sub.id))?.status ?? 'cancelled')) continue;
      }
      // Waiting for a decision, for another worker that has it, or for this gateway to stop.
      await this.waitForChange(subRunId, signal);
    }
  }

  /**
   * Marks the parent and the runs above it as waiting for the approvals the sub-run (or a
   * run below it) waits for. Each gets `subrun.approval_required` for every such call, and
   * the one that changes state also `run.requires_approval` naming the sub-run it waits on
   * and every call waiting below it.
   */
  private async holdAncestors(parent: RunView, waitingSubRunId: string): Promise<void> {
    const { tenantId } = parent;
    const subtree = [waitingSubRunId, ...(await this.runs.activeDescendants(tenantId, waitingSubRunId)).map((r) => r.id)];
    const approvals: NewEvent[] = [];
    for (const runId of subtree) {
      for (const call of await this.toolCalls.awaiting(tenantId, runId)) {
        approvals.push({
          type: 'subrun.approval_required',
          data: {
            subrun_id: runId,
            tool_call_id: call.callId,
            name: call.name,
            arguments: call.arguments,
            reason: call.reason,
            expires_at: call.expiresAt?.toISOString() ?? null,
          },
        });
      }
    }
    let run: RunView | null = parent;
    let below = waitingSubRunId;
    while (run) {
      const waiting: string[] = [];
      for (const sub of await this.runs.activeDescendants(tenantId, run.id)) waiting.push(...(await this.toolCalls.awaiting(tenantId, sub.id)).map((c) => c.callId));
      const held: NewEvent = { type: 'run.requires_approval', data: { tool_call_ids: waiting, subrun_id: below } };
      this.events.announce(run.id, await this.subRuns.holdForSubRun(tenantId, run.id, approvals, held));
      below = run.id;
      run = run.parentRunId ? await this.runs.find(tenantId, run.parentRunId) : null;
    }
  }

  /** Undoes holdAncestors, level by level, wherever no other sub-run still waits for a person. */
  private async releaseAncestors(parent: RunView, resumedSubRunId: string): Promise<void> {
    let run: RunView | null = parent;
    let below = resumedSubRunId;
    while (run) {
      const seqs = await this.subRuns.releaseFromSubRun(run.tenantId, run.id, [{ type: 'run.resumed', data: { reason: 'approval', subrun_id: below } }]);
      this.events.announce(run.id, seqs);
      below = run.id;
      run = run.parentRunId ? await this.runs.find(run.tenantId, run.parentRunId) : null;
    }
  }

  /** Resolves on the sub-run's next event, after RECHECK_MS at the latest; rejects when the parent stops. */
  private waitForChange(runId: string, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const finish = (err?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        subscription.unsubscribe();
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err as Error);
        else resolve();
      };
      const onAbort = () => finish(signal.reason ?? new Error('aborted'));
      const subscription = this.events.watch(runId, () => finish());
      const timer = setTimeout(() => finish(), RECHECK_MS);
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** The call's result: the sub-run's final answer and nothing else, or why there is none. */
function resultOf(sub: RunView): GatewayToolResult {
  const metadata = { subrun_id: sub.id, status: sub.status, usage: sub.usage };
  switch (sub.status) {
    case 'completed':
      return toolOutput(sub.output || '(the sub-agent finished without writing an answer)', metadata);
    case 'failed':
      return toolFailure(`failed: the sub-agent (run ${sub.id}) stopped without an answer: ${sub.error ?? 'no reason given'}`, metadata);
    default:
      return toolFailure(`cancelled: the sub-agent's run ${sub.id} was cancelled before it answered.`, metadata);
  }
}
