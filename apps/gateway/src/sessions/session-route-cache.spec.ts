import { SessionRouteCache } from './session-route-cache';

describe('SessionRouteCache', () => {
  let clock: number;
  let cache: SessionRouteCache;

  beforeEach(() => {
    clock = 1_000;
    cache = new SessionRouteCache(2_000, 3, () => clock);
  });

  it('answers within the TTL counted from the check, not from the last hit', () => {
    cache.set('ten_a', 'ses_1', 'exe_1', clock);
    clock += 1_500;
    expect(cache.get('ten_a', 'ses_1')).toBe('exe_1');
    clock += 499;
    expect(cache.get('ten_a', 'ses_1')).toBe('exe_1');
    clock += 1;
    expect(cache.get('ten_a', 'ses_1')).toBeUndefined();
  });

  it('an entry stamped with an older check expires sooner', () => {
    cache.set('ten_a', 'ses_1', 'exe_1', clock - 1_900);
    clock += 100;
    expect(cache.get('ten_a', 'ses_1')).toBeUndefined();
  });

  it('keys by tenant as well as session', () => {
    cache.set('ten_a', 'ses_1', 'exe_1', clock);
    expect(cache.get('ten_b', 'ses_1')).toBeUndefined();
  });

  it('forgets a session at once', () => {
    cache.set('ten_a', 'ses_1', 'exe_1', clock);
    cache.forget('ten_a', 'ses_1');
    expect(cache.get('ten_a', 'ses_1')).toBeUndefined();
  });

  it('does not take back a session forgotten after its check (deleted during the call)', () => {
    const checkedAt = clock;
    clock += 10;
    cache.forget('ten_a', 'ses_1');
    cache.set('ten_a', 'ses_1', 'exe_1', checkedAt);
    expect(cache.get('ten_a', 'ses_1')).toBeUndefined();
    clock += 10;
    cache.set('ten_a', 'ses_1', 'exe_1', clock);
    expect(cache.get('ten_a', 'ses_1')).toBe('exe_1');
  });

  it('stays bounded', () => {
    for (let i = 0; i < 4; i++) cache.set('ten_a', `ses_${i}`, 'exe_1', clock);
    expect(cache.get('ten_a', 'ses_0')).toBeUndefined();
    expect(cache.get('ten_a', 'ses_3')).toBe('exe_1');
  });
});
