import { ExecutorAnnouncement } from '@app/contracts';
import { ExecutorRegistry } from './executor-registry';

const HEARTBEAT = 1_000;

function announcement(id: string, fields: Partial<ExecutorAnnouncement> = {}): ExecutorAnnouncement {
  return { executor_id: id, instance: `${id}-1`, started_at: 0, capacity: 10, sandboxes: 0, warm_pool: 0, version: '0.1.0', state: 'ready', heartbeat_ms: HEARTBEAT, ...fields };
}

describe('ExecutorRegistry', () => {
  let now = 0;
  const registry = () => new ExecutorRegistry(10_000, HEARTBEAT, () => now);

  beforeEach(() => (now = 1_000_000));

  it('offers the executor with the most free room first, and counts what it placed until the next announcement', () => {
    const r = registry();
    r.heard(announcement('a', { sandboxes: 7 }));
    r.heard(announcement('b', { sandboxes: 2 }));
    r.heard(announcement('c', { sandboxes: 10 }));
    expect(r.candidates()).toEqual(['b', 'a']);
    for (let i = 0; i < 6; i++) r.placed('b');
    expect(r.candidates()).toEqual(['a', 'b']);
    // An announcement within a heartbeat of the placements may not count them yet.
    r.heard(announcement('b', { sandboxes: 2 }));
    expect(r.candidates()).toEqual(['a', 'b']);
    now += HEARTBEAT;
    r.heard(announcement('b', { sandboxes: 8 }));
    expect(r.candidates()).toEqual(['a', 'b']);
    r.heard(announcement('b', { sandboxes: 2 }));
    expect(r.candidates()[0]).toBe('b');
    expect(r.candidates(new Set(['b']))).toEqual(['a']);
  });

  it('stops counting a placement twice once an announcement asked for after its call ended counts it', () => {
    const r = registry();
    r.heard(announcement('a', { capacity: 10, sandboxes: 0 }));
    const settles = Array.from({ length: 10 }, () => r.placed('a'));
    expect(r.candidates()).toEqual([]);
    // Nine of the calls came back; the executor now holds those nine.
    settles.slice(0, 9).forEach((settle) => settle());
    now += 10;
    const askedAt = r.mark();
    // An announcement heard before the ask proves nothing about them.
    r.recounted(askedAt + 1);
    expect(r.candidates()).toEqual([]);
    now += 10;
    r.heard(announcement('a', { capacity: 10, sandboxes: 9 }));
    expect(r.candidates()).toEqual([]);
    r.recounted(askedAt);
    // Nine held, one call still out: no room yet, as nine are counted once and one in flight.
    expect(r.candidates()).toEqual([]);
    r.heard(announcement('a', { capacity: 12, sandboxes: 9 }));
    r.recounted(askedAt);
    expect(r.candidates()).toEqual(['a']);
    expect(r.list()[0]).toMatchObject({ sandboxes: 10 });
  });

  it('offers no draining or decommissioned executor', () => {
    const r = registry();
    r.heard(announcement('a', { state: 'draining' }));
    r.heard(announcement('b', { state: 'decommissioned' }));
    r.heard(announcement('c'));
    r.decommission('c');
    expect(r.candidates()).toEqual([]);
    expect(r.standing('a')).toEqual({ kind: 'serving' });
    expect(r.standing('c')).toMatchObject({ kind: 'gone', why: 'decommissioned' });
  });

  it('counts an executor lost after three silent heartbeats, and gone after the grace', () => {
    const r = registry();
    r.heard(announcement('a'));
    now += 3 * HEARTBEAT;
    expect(r.standing('a')).toEqual({ kind: 'serving' });
    now += 1;
    expect(r.standing('a')).toEqual({ kind: 'lost', silentMs: 3_001, graceLeftMs: 6_999 });
    expect(r.candidates()).toEqual([]);
    now += 7_000;
    expect(r.standing('a')).toEqual({ kind: 'gone', why: 'lost', silentMs: 10_001 });
    r.heard(announcement('a', { instance: 'a-2', started_at: 5 }));
    expect(r.standing('a')).toEqual({ kind: 'serving' });
  });

  it('times an executor it never heard from from its own start', () => {
    const r = registry();
    expect(r.standing('x')).toEqual({ kind: 'serving' });
    now += 10_001;
    expect(r.standing('x')).toMatchObject({ kind: 'gone', why: 'lost' });
  });

  it('keeps a decommission until a process started after it announces', () => {
    const r = registry();
    r.heard(announcement('a', { started_at: 10 }));
    r.decommission('a', 100);
    r.heard(announcement('a', { started_at: 10 }));
    expect(r.standing('a')).toMatchObject({ kind: 'gone', why: 'decommissioned' });
    r.heard(announcement('a', { instance: 'a-2', started_at: 200 }));
    expect(r.standing('a')).toEqual({ kind: 'serving' });
  });

  it('ignores a late heartbeat of an older process', () => {
    const r = registry();
    r.heard(announcement('a', { instance: 'new', started_at: 200, sandboxes: 1 }));
    expect(r.heard(announcement('a', { instance: 'old', started_at: 100, sandboxes: 9 }))).toBe(false);
    expect(r.list()[0]).toMatchObject({ id: 'a', sandboxes: 1 });
  });
});
