import { belowFairShare, fairShare, reservedWorkers, takesFromReserve, WorkerHolds } from './worker-share';

const holds = (byTenant: Record<string, number>, replicas = 1): WorkerHolds => ({ byTenant: new Map(Object.entries(byTenant)), replicas });

describe('worker share', () => {
  it('reserves an eighth of the pool, at least one, and nothing in a pool of one', () => {
    expect([1, 2, 4, 8, 16, 32, 100].map(reservedWorkers)).toEqual([0, 1, 1, 1, 2, 4, 12]);
  });

  it('lets a tenant alone fill the pool up to the reserve', () => {
    // 32 workers, 4 reserved: the 28th run of A leaves 4 free and is taken.
    expect(takesFromReserve(4, 32)).toBe(false);
    expect(takesFromReserve(3, 32)).toBe(true);
    // Inside the reserve, A alone is at its share of 28 and does not get the 29th worker.
    expect(belowFairShare('A', holds({ A: 28 }), 32)).toBe(false);
    expect(belowFairShare('A', holds({ A: 27 }), 32)).toBe(true);
  });

  it('gives a reserved worker to a newcomer while the busy tenant is over its share', () => {
    const busy = holds({ A: 28 });
    expect(fairShare('B', busy, 32)).toBe(14);
    expect(belowFairShare('B', busy, 32)).toBe(true);
    // A freed worker goes to the tenant below its share, not back to A.
    const two = holds({ A: 27, B: 1 });
    expect(belowFairShare('A', two, 32)).toBe(false);
    expect(belowFairShare('B', two, 32)).toBe(true);
    expect(belowFairShare('C', two, 32)).toBe(true);
  });

  it('splits the capacity of every replica holding runs, never below one worker', () => {
    expect(fairShare('A', holds({ A: 40, B: 10 }, 2), 32)).toBe(28);
    expect(fairShare('Z', holds(Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`t${i}`, 1]))), 32)).toBe(1);
    expect(belowFairShare('Z', holds(Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`t${i}`, 1]))), 32)).toBe(true);
  });

  it('shares a pool of four as the test deployment uses it', () => {
    expect(reservedWorkers(4)).toBe(1);
    expect(belowFairShare('A', holds({ A: 3 }), 4)).toBe(false);
    expect(belowFairShare('B', holds({ A: 3 }), 4)).toBe(true);
    expect(belowFairShare('B', holds({ A: 3, B: 1 }), 4)).toBe(false);
  });
});
