import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ChannelErrorKind } from '../sandbox/sandbox.service';

/** What the metrics read from the executor at each scrape. */
export interface ExecutorState {
  sandboxes(): Record<string, number>;
  warmPool(): { ready: number; target: number };
  channelErrors(): Readonly<Record<ChannelErrorKind, number>>;
}

/**
 * Prometheus metrics of this executor process, served at GET /metrics on its own HTTP port.
 * Sandbox counts and channel errors are read from the executor when scraped; Docker API
 * calls are timed as they happen (docker-api-timing.ts).
 */
export class ExecutorMetrics {
  readonly registry = new Registry();
  private state?: ExecutorState;

  private readonly dockerCalls = new Histogram({
    name: 'runbox_executor_docker_api_duration_seconds',
    help: 'Time the Docker engine took to answer an API call, by operation (method and path pattern) and outcome (ok, error)',
    labelNames: ['operation', 'outcome'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  constructor(executorId: string) {
    this.registry.setDefaultLabels({ executor: executorId });
    collectDefaultMetrics({ register: this.registry, prefix: 'runbox_executor_' });
    const read = (): ExecutorState | undefined => this.state;
    new Gauge({
      name: 'runbox_executor_sandboxes',
      help: 'Session sandboxes this executor holds, by state (busy: running a call, idle)',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        for (const [state, count] of Object.entries(read()?.sandboxes() ?? {})) this.set({ state }, count);
      },
    });
    new Gauge({
      name: 'runbox_executor_warm_pool_ready',
      help: 'Warm containers ready to hand to a new session',
      registers: [this.registry],
      collect() {
        this.set(read()?.warmPool().ready ?? 0);
      },
    });
    new Gauge({
      name: 'runbox_executor_warm_pool_target',
      help: 'Warm containers the pool aims to keep ready now (between RUNBOX_WARM_POOL_MIN and RUNBOX_WARM_POOL_MAX, by demand)',
      registers: [this.registry],
      collect() {
        this.set(read()?.warmPool().target ?? 0);
      },
    });
    new Counter({
      name: 'runbox_executor_channel_errors_total',
      help: 'Sandbox channel trouble, by kind: protocol_violation, reconnect (a channel opened again), sandbox_died (during a call), sandbox_restarted (died while idle, replaced)',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        // The executor keeps the running totals; each scrape reports them as they stand.
        this.reset();
        for (const [kind, count] of Object.entries(read()?.channelErrors() ?? {})) this.inc({ kind }, count);
      },
    });
  }

  /** Where the scrape-time figures come from (the executor's services exist after the metrics do). */
  watch(state: ExecutorState): void {
    this.state = state;
  }

  readonly observeDockerCall = (operation: string, seconds: number, failed: boolean): void => {
    this.dockerCalls.observe({ operation, outcome: failed ? 'error' : 'ok' }, seconds);
  };

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
