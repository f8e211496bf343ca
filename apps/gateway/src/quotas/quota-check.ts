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

type LimitName = 'max_sessions' | 'max_concurrent_runs' | 'runs_per_minute';

export interface ExceededLimit {
  limit: LimitName;
  max: number;
  current: number;
  retryAfterSeconds: number;
  message: string;
}

/** Nothing frees a session by itself: a client should come back once it deleted one. */
const SESSIONS_RETRY_SECONDS = 60;
/** Runs end on their own; a short wait is usually enough. */
const RUNS_RETRY_SECONDS = 5;

interface LimitRule {
  limit: LimitName;
  count: (usage: TenantUsage) => number;
  retryAfterSeconds: (after: TenantUsage) => number;
  advice: (retryAfterSeconds: number) => string;
}

/** Checked in this order; the first one broken is reported. */
const RULES: readonly LimitRule[] = [
  { limit: 'max_sessions', count: (u) => u.sessions, retryAfterSeconds: () => SESSIONS_RETRY_SECONDS, advice: () => 'delete a session to create another' },
  { limit: 'max_concurrent_runs', count: (u) => u.activeRuns, retryAfterSeconds: () => RUNS_RETRY_SECONDS, advice: () => 'wait for a run to finish' },
  {
    limit: 'runs_per_minute',
    count: (u) => u.recentRuns,
    retryAfterSeconds: (after) => Math.max(1, after.windowResetSeconds),
    advice: (seconds) => `retry in ${seconds} s`,
  },
];

/**
 * The first limit the request broke, or undefined. A limit is broken when the request
 * raised a count (so a repeated idempotent request that created nothing passes) and the
 * count is now above the limit.
 */
export function exceededLimit(limits: TenantLimits, before: TenantUsage, after: TenantUsage): ExceededLimit | undefined {
  for (const rule of RULES) {
    const max = limits[rule.limit];
    const [was, now] = [rule.count(before), rule.count(after)];
    if (max === undefined || now <= was || now <= max) continue;
    const retryAfterSeconds = rule.retryAfterSeconds(after);
    return {
      limit: rule.limit,
      max,
      current: was,
      retryAfterSeconds,
      message: `tenant limit ${rule.limit} (${max}) reached: ${rule.advice(retryAfterSeconds)}`,
    };
  }
  return undefined;
}

/**
 * Whether one more of everything (a session, an active run, a run in the window) still
 * fits under every limit. A request adds at most one to each count, other requests wait
 * for the tenant's quota lock, and nothing else raises a count (runs end, sessions go,
 * the window moves on), so such a request cannot break a limit: it needs no count after.
 */
export function roomForOneMore(limits: TenantLimits, before: TenantUsage): boolean {
  return RULES.every((rule) => {
    const max = limits[rule.limit];
    return max === undefined || rule.count(before) + 1 <= max;
  });
}
