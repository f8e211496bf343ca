import type { RunboxConfig } from '@app/config';

export interface WarmPoolSizing {
  /** Ready containers kept even when no session is being created. */
  min: number;
  /** The most the pool grows to under a burst of new sessions; 0 = no pool. */
  max: number;
  /** After this long with no hand-out, the target halves (never below `min`). */
  idleMs: number;
}

/** The sizing the configuration asks for: a fixed RUNBOX_WARM_POOL_SIZE wins over min and max. */
export function warmPoolSizingFrom(config: RunboxConfig): WarmPoolSizing {
  const idleMs = config.RUNBOX_WARM_POOL_IDLE_SECONDS * 1000;
  const fixed = config.RUNBOX_WARM_POOL_SIZE;
  if (fixed !== undefined) return { min: fixed, max: fixed, idleMs };
  const max = config.RUNBOX_WARM_POOL_MAX;
  return { min: Math.min(config.RUNBOX_WARM_POOL_MIN, max), max, idleMs };
}

/**
 * How many warm containers the pool should hold, from how new sessions arrive. A hand-out
 * that leaves the pool empty (or finds it empty) means sessions came faster than it refills:
 * the target grows by one, up to `max`, so a burst of N new sessions asks for about N more.
 * A whole idle window without a hand-out halves the target, down to `min`, so a burst's
 * containers do not sit on the host's memory for long once it is over. Pure bookkeeping:
 * the pool decides what to create or remove from it.
 */
export class WarmPoolDemand {
  private current: number;
  private lastHandOut: number;

  constructor(
    private readonly sizing: WarmPoolSizing,
    now: number,
  ) {
    this.current = sizing.min;
    this.lastHandOut = now;
  }

  get target(): number {
    return this.current;
  }

  /** A new session asked for a warm container; `leftReady` is how many are still ready after it. */
  handedOut(leftReady: number, now: number): void {
    this.lastHandOut = now;
    if (leftReady === 0) this.current = Math.min(this.sizing.max, this.current + 1);
  }

  /** Halves the target after an idle window; true when it shrank. */
  shrinkIfIdle(now: number): boolean {
    if (this.current <= this.sizing.min || now - this.lastHandOut < this.sizing.idleMs) return false;
    this.current = Math.max(this.sizing.min, Math.floor(this.current / 2));
    // The next halving needs another whole idle window.
    this.lastHandOut = now;
    return true;
  }
}
