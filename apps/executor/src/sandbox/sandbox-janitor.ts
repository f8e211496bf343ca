import type { Logger } from 'pino';
import { SandboxService } from './sandbox.service';

export interface JanitorSchedule {
  /** How often idle sandboxes are looked for (a fraction of the idle TTL). */
  reapEveryMs: number;
  /** How often the orphan sweep runs (RUNBOX_SANDBOX_SWEEP_SECONDS). */
  sweepEveryMs: number;
}

/** The reap interval for an idle TTL: a quarter of it, between 250 ms and 30 s. */
export function reapIntervalFor(idleTtlMs: number): number {
  return Math.min(30_000, Math.max(250, Math.floor(idleTtlMs / 4)));
}

/**
 * Runs the idle reaper and the orphan sweep on timers. A run never overlaps the previous
 * run of the same job, and a failing run is logged and retried at the next tick.
 */
export class SandboxJanitor {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly sandboxes: SandboxService,
    private readonly schedule: JanitorSchedule,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.every(this.schedule.reapEveryMs, 'reap', () => this.sandboxes.reapIdle());
    this.every(this.schedule.sweepEveryMs, 'sweep', () => this.sandboxes.sweep());
  }

  /** Runs one sweep now (at start-up, before any call is served). */
  sweepNow(): Promise<void> {
    return this.once('sweep', () => this.sandboxes.sweep());
  }

  /** Stops the timers and waits for a run in progress, so nothing outlives the database connection. */
  async stop(): Promise<void> {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    await Promise.all(this.running.values());
  }

  private every(ms: number, job: string, work: () => Promise<number>): void {
    const timer = setInterval(() => void this.once(job, work), ms);
    timer.unref();
    this.timers.push(timer);
  }

  private once(job: string, work: () => Promise<number>): Promise<void> {
    const current = this.running.get(job);
    if (current) return current;
    const run = this.run(job, work).finally(() => this.running.delete(job));
    this.running.set(job, run);
    return run;
  }

  private async run(job: string, work: () => Promise<number>): Promise<void> {
    try {
      const count = await work();
      if (count > 0) this.logger.info({ job, count }, 'sandbox janitor');
    } catch (err) {
      this.logger.error({ err, job }, 'sandbox janitor run failed');
    }
  }
}
