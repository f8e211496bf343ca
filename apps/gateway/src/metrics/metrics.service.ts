import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BoundedLabels } from './bounded-labels';

/** Distinct model names with a label of their own; a run may name any model, so it is bounded too. */
const MODEL_LABELS = 20;

/** How long a scrape waits for the count of active runs. */
const ACTIVE_RUNS_TIMEOUT_MS = 2_000;

/** Seconds, from a 5 ms tool call to a run that takes an hour. */
const LONG_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600];

/** How a model call ended: answered, failed (retryable or not), or stopped by its run. */
export type ModelCallOutcome = 'ok' | 'error' | 'aborted';

/**
 * Prometheus metrics of this gateway process, served at GET /metrics. Counters count what
 * this process did (sum them over replicas); labels are bounded: routes by pattern, tools
 * by registered name, tenants and models by BoundedLabels.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  private readonly tenants: BoundedLabels;
  private readonly models = new BoundedLabels(MODEL_LABELS);

  readonly httpRequests = new Counter({
    name: 'runbox_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'runbox_http_request_duration_seconds',
    help: 'Time to answer an HTTP request (for event streams: until the stream ends)',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  private readonly runsCreated = new Counter({
    name: 'runbox_runs_created_total',
    help: 'Runs created through this gateway (sub-runs included), by tenant (bounded: see RUNBOX_METRICS_TENANT_LABELS)',
    labelNames: ['tenant'] as const,
    registers: [this.registry],
  });

  private readonly runsEnded = new Counter({
    name: 'runbox_runs_ended_total',
    help: 'Runs this gateway ended, by final status (completed, failed, cancelled) and tenant (bounded)',
    labelNames: ['status', 'tenant'] as const,
    registers: [this.registry],
  });

  private readonly runDuration = new Histogram({
    name: 'runbox_run_duration_seconds',
    help: 'From a run starting to its end, by final status (approval waits included)',
    labelNames: ['status'] as const,
    buckets: LONG_BUCKETS,
    registers: [this.registry],
  });

  private readonly queueWait = new Histogram({
    name: 'runbox_run_queue_wait_seconds',
    help: 'From a run being created to a worker starting it',
    buckets: LONG_BUCKETS,
    registers: [this.registry],
  });

  private readonly toolCalls = new Counter({
    name: 'runbox_tool_calls_total',
    help: 'Tool calls of runs given their result, by tool and status (completed, failed, refused, interrupted, cancelled)',
    labelNames: ['tool', 'status'] as const,
    registers: [this.registry],
  });

  private readonly tenantToolCalls = new Counter({
    name: 'runbox_tenant_tool_calls_total',
    help: 'Tool calls of runs given their result, by tenant (bounded)',
    labelNames: ['tenant'] as const,
    registers: [this.registry],
  });

  private readonly toolCallDuration = new Histogram({
    name: 'runbox_tool_call_duration_seconds',
    help: 'Time a tool call of a run took to execute, by tool and outcome (ok, error: the tool reported an error, failed: it could not run or gave no answer)',
    labelNames: ['tool', 'outcome'] as const,
    buckets: LONG_BUCKETS,
    registers: [this.registry],
  });

  private readonly modelCallDuration = new Histogram({
    name: 'runbox_model_call_duration_seconds',
    help: 'Time a model call took, by provider, model (bounded) and outcome (ok, error, aborted)',
    labelNames: ['provider', 'model', 'outcome'] as const,
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300],
    registers: [this.registry],
  });

  private readonly modelCallErrors = new Counter({
    name: 'runbox_model_call_errors_total',
    help: 'Model calls that failed, by provider, model (bounded) and whether the failure was retryable',
    labelNames: ['provider', 'model', 'retryable'] as const,
    registers: [this.registry],
  });

  private activeRuns?: () => Promise<Record<string, number>>;

  constructor(@Inject(RUNBOX_CONFIG) config: RunboxConfig) {
    const read = () => this.activeRuns;
    new Gauge({
      name: 'runbox_runs_active',
      help: 'Runs of the whole deployment not yet ended, by status (queued, running, requires_approval), read from Postgres at each scrape; every gateway reports the same figure',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const source = read();
        if (!source) return;
        // A scrape must not hang on, or fail with, a slow database: then the gauge is left out.
        this.reset();
        const counts = await withTimeout(source(), ACTIVE_RUNS_TIMEOUT_MS).catch(() => undefined);
        for (const [status, runs] of Object.entries(counts ?? {})) this.set({ status }, runs);
      },
    });
    this.tenants = new BoundedLabels(config.RUNBOX_METRICS_TENANT_LABELS);
    collectDefaultMetrics({ register: this.registry, prefix: 'runbox_gateway_' });
  }

  /** Where the count of active runs comes from (the runs feature, which reads Postgres). */
  watchActiveRuns(source: () => Promise<Record<string, number>>): void {
    this.activeRuns = source;
  }

  runCreated(tenantId: string): void {
    this.runsCreated.inc({ tenant: this.tenants.label(tenantId) });
  }

  runStarted(createdAt: Date, startedAt = new Date()): void {
    this.queueWait.observe(secondsBetween(createdAt, startedAt));
  }

  runEnded(tenantId: string, status: string, startedAt: Date | null, endedAt: Date): void {
    this.runsEnded.inc({ status, tenant: this.tenants.label(tenantId) });
    // A run cancelled while queued never started: it has no duration to count.
    if (startedAt) this.runDuration.observe({ status }, secondsBetween(startedAt, endedAt));
  }

  /** `tool` must be a registered tool's name (or `unknown`), never what a model wrote. */
  toolCallEnded(tenantId: string, tool: string, status: string): void {
    this.toolCalls.inc({ tool, status });
    this.tenantToolCalls.inc({ tenant: this.tenants.label(tenantId) });
  }

  /** Starts timing a tool call's execution; call the result with how it went. */
  timeToolCall(tool: string): (outcome: 'ok' | 'error' | 'failed') => void {
    const end = this.toolCallDuration.startTimer({ tool });
    return (outcome) => end({ outcome });
  }

  modelCallEnded(call: { provider: string; model: string; outcome: ModelCallOutcome; seconds: number; retryable?: boolean }): void {
    const model = this.models.label(call.model);
    this.modelCallDuration.observe({ provider: call.provider, model, outcome: call.outcome }, call.seconds);
    if (call.outcome === 'error') this.modelCallErrors.inc({ provider: call.provider, model, retryable: String(call.retryable ?? false) });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}

function secondsBetween(from: Date, to: Date): number {
  return Math.max(0, (to.getTime() - from.getTime()) / 1000);
}
