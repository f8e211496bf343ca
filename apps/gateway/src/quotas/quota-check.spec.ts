import { exceededLimit, roomForOneMore, TenantUsage } from './quota-check';
import { applyLimitsPatch, DEFAULT_TENANT_LIMITS, limitsForNewTenant, parseStoredLimits } from './tenant-limits';

const usage = (u: Partial<TenantUsage>): TenantUsage => ({ sessions: 0, activeRuns: 0, recentRuns: 0, windowResetSeconds: 60, ...u });

describe('exceededLimit', () => {
  it('passes a request that stays within every limit', () => {
    expect(exceededLimit({ max_sessions: 2 }, usage({ sessions: 1 }), usage({ sessions: 2 }))).toBeUndefined();
  });

  it('names the limit the request went over, with its retry time', () => {
    expect(exceededLimit({ max_concurrent_runs: 2 }, usage({ activeRuns: 2 }), usage({ activeRuns: 3 }))).toMatchObject({
      limit: 'max_concurrent_runs',
      max: 2,
      current: 2,
      retryAfterSeconds: 5,
    });
    expect(exceededLimit({ runs_per_minute: 1 }, usage({ recentRuns: 1 }), usage({ recentRuns: 2, windowResetSeconds: 17 }))).toMatchObject({
      limit: 'runs_per_minute',
      retryAfterSeconds: 17,
    });
  });

  it('lets a request that created nothing through, even over a lowered limit', () => {
    expect(exceededLimit({ max_sessions: 1 }, usage({ sessions: 3 }), usage({ sessions: 3 }))).toBeUndefined();
  });

  it('treats 0 as "none allowed" and an absent limit as no limit', () => {
    expect(exceededLimit({ max_sessions: 0 }, usage({}), usage({ sessions: 1 }))?.limit).toBe('max_sessions');
    expect(exceededLimit({}, usage({}), usage({ sessions: 1000, activeRuns: 1000, recentRuns: 1000 }))).toBeUndefined();
  });

  it('never asks to retry in less than a second', () => {
    expect(exceededLimit({ runs_per_minute: 0 }, usage({}), usage({ recentRuns: 1, windowResetSeconds: 0 }))?.retryAfterSeconds).toBe(1);
  });
});

describe('tenant limits', () => {
  it('applies a patch: numbers set, null removes, absent keeps', () => {
    expect(applyLimitsPatch({ max_sessions: 1, runs_per_minute: 5 }, { max_sessions: 3, runs_per_minute: null, max_sandboxes: 0 })).toEqual({
      max_sessions: 3,
      max_sandboxes: 0,
    });
  });

  it('gives a new tenant every default limit, with the ones named at creation in their place', () => {
    expect(limitsForNewTenant()).toEqual({ max_concurrent_runs: 16, max_sessions: 1000, max_sandboxes: 20, runs_per_minute: 120 });
    expect(limitsForNewTenant({ max_sessions: 2, max_concurrent_runs: 0 })).toEqual({ ...DEFAULT_TENANT_LIMITS, max_sessions: 2, max_concurrent_runs: 0 });
  });

  it('reads stored limits leniently', () => {
    expect(parseStoredLimits({ max_sessions: 2, max_sandboxes: 'lots', other: 1 })).toEqual({ max_sessions: 2 });
    expect(parseStoredLimits(null)).toEqual({});
  });
});

describe('roomForOneMore', () => {
  it('is true only while one more session and run fit under every limit', () => {
    expect(roomForOneMore({}, usage({ sessions: 10 }))).toBe(true);
    expect(roomForOneMore({ max_sessions: 3, max_concurrent_runs: 3, runs_per_minute: 3 }, usage({ sessions: 2, activeRuns: 2, recentRuns: 2 }))).toBe(true);
    expect(roomForOneMore({ max_sessions: 3 }, usage({ sessions: 3 }))).toBe(false);
    expect(roomForOneMore({ max_concurrent_runs: 2 }, usage({ activeRuns: 2 }))).toBe(false);
    expect(roomForOneMore({ runs_per_minute: 5 }, usage({ recentRuns: 5 }))).toBe(false);
    expect(roomForOneMore({ max_sessions: 0 }, usage({}))).toBe(false);
  });
});
