import { TenantLimits } from './tenant-limits';

/** What a tenant is using now, as the quota check counts it. */
export interface TenantUsage {
  /** Live (not deleted) sessions. */
  sessions: number;
  /** Runs queued, running or waiting for an approval. */
  activeRuns: number;
  /** Runs created in the last 60 seconds. */
  recentRuns: number;
  /** Seconds until the oldest of those leaves the window. */
  windowResetSeconds: number;
}

export interface ExceededLimit {
  limit: 'max_sessions' | 'max_concurrent_runs' | 'runs_per_minute';
  max: number;
  current: number;
  retryAfterSeconds: number;
  message: string;
}

/** Nothing frees a session by itself: a client should come back once it deleted one. */
const SESSIONS_RETRY_SECONDS = 60;
/** Runs end on their own; a short wait is usually enough. */
const RUNS_RETRY_SECONDS = 5;

/**
 * The first limit the request broke, or undefined. A limit is broken when the request
 * raised a count (so a repeated idempotent request that created nothing passes) and the
 * count is now above the limit.
 */
export function exceededLimit(limits: TenantLimits, before: TenantUsage, after: TenantUsage): ExceededLimit | undefined {
  const broke = (max: number | undefined, b: number, a: number): max is number => max !== undefined && a > b && a > max;
  if (broke(limits.max_sessions, before.sessions, after.sessions)) {
    const max = limits.max_sessions;
    return {
      limit: 'max_sessions',
      max,
      current: before.sessions,
      retryAfterSeconds: SESSIONS_RETRY_SECONDS,
      message: `tenant limit max_sessions (${max}) reached: delete a session to create another`,
    };
  }
  if (broke(limits.max_concurrent_runs, before.activeRuns, after.activeRuns)) {
    const max = limits.max_concurrent_runs;
    return {
      limit: 'max_concurrent_runs',
      max,
      current: before.activeRuns,
      retryAfterSeconds: RUNS_RETRY_SECONDS,
      message: `tenant limit max_concurrent_runs (${max}) reached: wait for a run to finish`,
    };
  }
  if (broke(limits.runs_per_minute, before.recentRuns, after.recentRuns)) {
    const max = limits.runs_per_minute;
    const retryAfterSeconds = Math.max(1, after.windowResetSeconds);
    return {
      limit: 'runs_per_minute',
      max,
      current: before.recentRuns,
      retryAfterSeconds,
      message: `tenant limit runs_per_minute (${max}) reached: retry in ${retryAfterSeconds} s`,
    };
  }
  return undefined;
}
