import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { runCancelContract } from '@app/contracts';
import { AppError, ErrorCode } from '@app/errors';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { MetricsService } from '../metrics/metrics.service';
import { ExecutorClient } from '../tools/executor.client';
import { usageFrom, wallMs } from './run-context';
import { RunEnqueuer } from './run-enqueuer';
import { RunEventsService } from './run-events.service';
import { ApprovalInput } from './run-options';
import { RunsRepository, RunView } from './runs.repository';
import { DecideOutcome, ToolCallsRepository } from './tool-calls.repository';

export const CANCELLED_RESULT = 'cancelled: the run was cancelled before this tool call finished.';

/** What clients (and the approval timeout) do to a run from outside: cancel it, decide its approvals. */
@Injectable()
export class RunControlService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly events: RunEventsService,
    private readonly enqueuer: RunEnqueuer,
    private readonly executor: ExecutorClient,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * Cancels the run at once: it is `cancelled` in Postgres (with `run.cancelled` as its last
   * event) before this returns. The worker executing it is told to stop and the tool it is
   * running is interrupted in the sandbox; the container stays. Cancelling a cancelled run
   * is a no-op; a completed or failed one is a 409.
   */
  async cancel(tenantId: string, runId: string, why: { reason?: string; startNext?: boolean } = {}): Promise<RunView> {
    const run = await this.runs.find(tenantId, runId);
    if (!run) throw AppError.notFound('run', runId);
    if (run.status === 'cancelled') return run;
    const done = await this.runs.finish(
      tenantId,
      run,
      ['queued', 'running', 'requires_approval'],
      'cancelled',
      { usage: (startedAt, now) => ({ ...usageFrom(run.usage), wall_ms: wallMs(startedAt, now) }) },
      { type: 'run.cancelled', data: why.reason ? { reason: why.reason } : {} },
      { status: 'cancelled', output: CANCELLED_RESULT, isError: true },
    );
    if (!done) {
      const now = await this.runs.find(tenantId, runId);
      if (now?.status === 'cancelled') return now;
      throw new AppError(ErrorCode.Conflict, `run ${runId} already ended (${now?.status ?? run.status}); only a queued, running or waiting run can be cancelled`);
    }
    this.events.announce(runId, done.seqs);
    this.metrics.runEnded(tenantId, 'cancelled', done.startedAt, done.endedAt);
    this.nats.publish(runCancelContract, { run_id: runId });
    for (const callId of done.runningCallIds) this.executor.cancelTool(tenantId, run.sessionId, `${runId}:${callId}`);
    await this.cancelSubRuns(tenantId, runId, why.reason);
    if (!run.parentRunId && why.startNext !== false) await this.enqueuer.startNextInSession(tenantId, run.sessionId);
    return (await this.runs.find(tenantId, runId)) ?? run;
  }

  /**
   * A deleted session's runs end with it: each one that has not ended is cancelled (its
   * tool interrupted, its sub-runs too) and none queued behind them starts.
   */
  async cancelSessionRuns(tenantId: string, sessionId: string): Promise<number> {
    let cancelled = 0;
    for (const run of await this.runs.activeInSession(tenantId, sessionId)) {
      if (await this.cancelIfActive(tenantId, run.id, { reason: 'the session was deleted', startNext: false })) cancelled++;
    }
    return cancelled;
  }

  /** Cancels the run's sub-runs that have not ended (theirs too): they work for a run that has. */
  async cancelSubRuns(tenantId: string, runId: string, reason?: string): Promise<void> {
    for (const sub of await this.runs.activeDescendants(tenantId, runId)) {
      if (sub.parentRunId !== runId) continue; // cancelling a child cancels its own children
      await this.cancelIfActive(tenantId, sub.id, { reason });
    }
  }

  /** Cancels the run unless it ended by itself meanwhile (then there is nothing to cancel). */
  private async cancelIfActive(tenantId: string, runId: string, why: { reason?: string; startNext?: boolean }): Promise<boolean> {
    try {
      await this.cancel(tenantId, runId, why);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === ErrorCode.Conflict) return false;
      throw err;
    }
  }

  /**
   * POST /v1/runs/{id}/approvals: records the decision; the run goes on once none is
   * pending. A call id the run does not have is looked for among its sub-runs' waiting
   * calls, so a client that follows only the run it made can decide for its sub-runs too.
   * Returns the run named in the path and the run the call belongs to.
   */
  async decide(tenantId: string, runId: string, input: ApprovalInput): Promise<{ run: RunView; callRunId: string }> {
    let callRunId = runId;
    let outcome = await this.record(tenantId, runId, input);
    if (!outcome.ok && outcome.problem === 'call_not_found') {
      const owners = await this.subRunsAwaiting(tenantId, runId, input.tool_call_id);
      if (owners.length > 1) {
        throw new AppError(
          ErrorCode.Conflict,
          `tool call ${input.tool_call_id} waits in more than one sub-run (${owners.join(', ')}); decide it on its sub-run: POST /v1/runs/{sub-run id}/approvals`,
          { run_ids: owners },
        );
      }
      if (owners.length === 1) {
        callRunId = owners[0];
        outcome = await this.record(tenantId, callRunId, input);
      }
    }
    if (!outcome.ok) {
      switch (outcome.problem) {
        case 'run_not_found':
          throw AppError.notFound('run', runId);
        case 'call_not_found':
          throw AppError.notFound('tool call', input.tool_call_id);
        case 'run_finished':
          throw new AppError(ErrorCode.Conflict, `run ${callRunId} already ended (${outcome.status}); there is nothing to approve`);
        case 'not_awaiting':
          throw new AppError(ErrorCode.Conflict, `tool call ${input.tool_call_id} is not waiting for approval (it is ${outcome.status})`);
      }
    }
    this.events.announce(callRunId, outcome.seqs);
    await this.resumeIfReady(tenantId, callRunId, outcome.runStatus, outcome.stillAwaiting);
    return { run: (await this.runs.find(tenantId, runId))!, callRunId };
  }

  private record(tenantId: string, runId: string, input: ApprovalInput): Promise<DecideOutcome> {
    const approve = input.decision === 'approve';
    return this.toolCalls.decide(tenantId, runId, input.tool_call_id, approve, approve ? 'approved' : 'denied', input.reason ?? '', {
      type: approve ? 'tool_call.approved' : 'tool_call.denied',
      data: { tool_call_id: input.tool_call_id, by: 'approver', ...(input.reason ? { reason: input.reason } : {}) },
    });
  }

  /** Sub-runs below the run with a call of this id waiting for a decision. */
  private async subRunsAwaiting(tenantId: string, runId: string, callId: string): Promise<string[]> {
    const owners: string[] = [];
    for (const sub of await this.runs.activeDescendants(tenantId, runId)) {
      if ((await this.toolCalls.awaiting(tenantId, sub.id)).some((c) => c.callId === callId)) owners.push(sub.id);
    }
    return owners;
  }

  /** The approval timeout: an undecided call past its deadline is denied, and the model told so. */
  async expireApproval(tenantId: string, runId: string, callId: string): Promise<void> {
    const run = await this.runs.find(tenantId, runId);
    const seconds = run?.options.limits?.approval_timeout_seconds ?? this.config.RUNBOX_APPROVAL_TIMEOUT_SECONDS;
    const reason = `nobody approved or denied this call within ${seconds} seconds (the approval timeout)`;
    const outcome = await this.toolCalls.decide(tenantId, runId, callId, false, 'timed_out', reason, {
      type: 'tool_call.denied',
      data: { tool_call_id: callId, by: 'timeout', reason },
    });
    if (!outcome.ok) return; // decided or ended meanwhile
    this.events.announce(runId, outcome.seqs);
    await this.resumeIfReady(tenantId, runId, outcome.runStatus, outcome.stillAwaiting);
  }

  /**
   * A parked run with every approval decided goes back on the queue. A run still `running`
   * needs nothing: its worker reads the decision before it would park.
   */
  private async resumeIfReady(tenantId: string, runId: string, runStatus: string, stillAwaiting: number): Promise<void> {
    if (runStatus === 'requires_approval' && stillAwaiting === 0) await this.enqueuer.enqueue(tenantId, runId, 'approval');
  }
}
