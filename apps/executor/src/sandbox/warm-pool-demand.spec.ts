import { loadConfig } from '@app/config';
import { WarmPoolDemand, warmPoolSizingFrom } from './warm-pool-demand';

describe('WarmPoolDemand', () => {
  const sizing = { min: 2, max: 8, idleMs: 60_000 };

  it('starts at its minimum', () => {
    expect(new WarmPoolDemand(sizing, 0).target).toBe(2);
  });

  it('grows by one for each hand-out that leaves the pool empty, up to its maximum', () => {
    const demand = new WarmPoolDemand(sizing, 0);
    demand.handedOut(1, 10);
    expect(demand.target).toBe(2);
    for (let i = 0; i < 20; i++) demand.handedOut(0, 20 + i);
    expect(demand.target).toBe(8);
  });

  it('halves after each whole idle window without a hand-out, down to its minimum', () => {
    const demand = new WarmPoolDemand(sizing, 0);
    for (let i = 0; i < 6; i++) demand.handedOut(0, 1_000);
    expect(demand.target).toBe(8);
    expect(demand.shrinkIfIdle(60_999)).toBe(false);
    expect(demand.shrinkIfIdle(61_000)).toBe(true);
    expect(demand.target).toBe(4);
    // The window starts again from the halving.
    expect(demand.shrinkIfIdle(100_000)).toBe(false);
    expect(demand.shrinkIfIdle(121_000)).toBe(true);
    expect(demand.target).toBe(2);
    expect(demand.shrinkIfIdle(1_000_000)).toBe(false);
    expect(demand.target).toBe(2);
  });

  it('does not shrink while sessions keep taking containers', () => {
    const demand = new WarmPoolDemand(sizing, 0);
    demand.handedOut(0, 0);
    for (let t = 30_000; t < 300_000; t += 30_000) {
      demand.handedOut(1, t);
      expect(demand.shrinkIfIdle(t + 1)).toBe(false);
    }
    expect(demand.target).toBe(3);
  });
});

describe('warmPoolSizingFrom', () => {
  it('is on by default, sized by demand between 2 and 32', () => {
    expect(warmPoolSizingFrom(loadConfig({}))).toEqual({ min: 2, max: 32, idleMs: 60_000 });
  });

  it('takes a fixed RUNBOX_WARM_POOL_SIZE over min and max, 0 turning the pool off', () => {
    expect(warmPoolSizingFrom(loadConfig({ RUNBOX_WARM_POOL_SIZE: '3', RUNBOX_WARM_POOL_MAX: '10' }))).toMatchObject({ min: 3, max: 3 });
    expect(warmPoolSizingFrom(loadConfig({ RUNBOX_WARM_POOL_SIZE: '0' }))).toMatchObject({ min: 0, max: 0 });
    // Empty, as `${VAR:-}` in a compose file leaves it: unset.
    expect(warmPoolSizingFrom(loadConfig({ RUNBOX_WARM_POOL_SIZE: '' }))).toMatchObject({ min: 2, max: 32 });
  });

  it('lowers a minimum above the maximum to it', () => {
    expect(warmPoolSizingFrom(loadConfig({ RUNBOX_WARM_POOL_MAX: '0' }))).toMatchObject({ min: 0, max: 0 });
    expect(warmPoolSizingFrom(loadConfig({ RUNBOX_WARM_POOL_MIN: '5', RUNBOX_WARM_POOL_MAX: '3' }))).toMatchObject({ min: 3, max: 3 });
  });
});
