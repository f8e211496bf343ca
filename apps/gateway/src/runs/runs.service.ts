import { Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { RunEnqueuer } from './run-enqueuer';
import { RunEventsService } from './run-events.service';
import { MetricsService } from '../metrics/metrics.service';
import { QuotasService } from '../quotas/quotas.service';
import { applyRunDefaults } from './run-defaults';
import { RunDefaultsRepository } from './run-defaults.repository';
import { CreateRunInput } from './run-options';
import { RunToolSelection } from './run-tools';
import { RunsRepository, RunView } from './runs.repository';
import { ToolCallsRepository, ToolCallView } from './tool-calls.repository';

/** What the request that makes a run says besides its body. */
export interface RunRequest {
  idempotencyKey?: string;
  apiKeyId?: string;
  /** The request's correlation id, kept with the run for whichever worker executes it. */
  requestId?: string;
}

@Injectable()
export class RunsService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly enqueuer: RunEnqueuer,
    private readonly events: RunEventsService,
    private readonly quotas: QuotasService,
    private readonly defaults: RunDefaultsRepository,
    private readonly metrics: MetricsService,
    private readonly toolSelection: RunToolSelection,
  ) {}

  /**
   * Creates and queues a run. A repeated idempotency key returns the first run; a session
   * that already has a run going answers 409 unless the request asks to queue behind it.
   */
  async create(tenantId: string, input: CreateRunInput, from: RunRequest = {}): Promise<{ run: RunView; created: boolean }> {
    const { idempotencyKey, apiKeyId, requestId } = from;
    const { session_id: sessionId, input: text, metadata, on_busy: onBusy, ...requested } = input;
    // A run that starts in this replica lists its tenant's tools before it starts: their
    // stored configuration is read now, beside the creation, rather than after its commit.
    const storedTools = this.enqueuer.startsHere() ? this.toolSelection.readTenantTools(tenantId) : undefined;
    const defaults = await this.defaults.forRun(tenantId, apiKeyId);
    const { options, sources } = applyRunDefaults(requested, defaults.apiKey, defaults.tenant);
    // The quota check and the creation commit together, or neither does.
    const outcome = await this.runs.create(
      tenantId,
      { sessionId, input: text, options, optionSources: sources, idempotencyKey, requestId, sessionMetadata: metadata, enqueueWhenBusy: onBusy === 'enqueue' },
      (creation) => this.quotas.admitSql(tenantId, creation),
    );
    switch (outcome.kind) {
      case 'session_not_found':
        throw AppError.notFound('session', sessionId ?? '');
      case 'session_busy':
        throw new AppError(
          ErrorCode.Conflict,
          `session ${sessionId} is busy with run ${outcome.activeRunId}; wait for it to end, or send "on_busy": "enqueue" to start this run after it`,
          { active_run_id: outcome.activeRunId },
        );
      case 'existing':
        return { run: outcome.run, created: false };
      case 'created':
        this.metrics.runCreated(tenantId);
        this.events.announce(outcome.run.id, [1]);
        await this.enqueuer.enqueueCreated(outcome.run, storedTools);
        return { run: outcome.run, created: true };
    }
  }

  async get(tenantId: string, id: string): Promise<RunView> {
    const run = await this.runs.find(tenantId, id);
    if (!run) throw AppError.notFound('run', id);
    return run;
  }

  list(tenantId: string, sessionId: string | undefined, limit: number, parentRunId?: string): Promise<RunView[]> {
    return this.runs.listForSession(tenantId, sessionId, limit, parentRunId);
  }

  /**
   * The calls waiting for a decision (shown on the run while it is `requires_approval`):
   * its own, then those of its sub-runs, each with the run it belongs to.
   */
  async pendingApprovals(tenantId: string, runId: string): Promise<ToolCallView[]> {
    const own = await this.toolCalls.awaiting(tenantId, runId);
    const below = [];
    for (const sub of await this.runs.activeDescendants(tenantId, runId)) below.push(...(await this.toolCalls.awaiting(tenantId, sub.id)));
    return [...own, ...below];
  }
}
