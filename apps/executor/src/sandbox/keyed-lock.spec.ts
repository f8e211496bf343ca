import { KeyedLock } from './keyed-lock';

describe('KeyedLock', () => {
  it('runs work for one key in order, one at a time, and forgets the key afterwards', async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = lock.run('s1', async () => {
      log.push('first:start');
      await gate;
      log.push('first:end');
    });
    const second = lock.run('s1', async () => {
      log.push('second');
      return 42;
    });
    const other = lock.run('s2', async () => log.push('other'));
    await other;
    expect(log).toEqual(['first:start', 'other']);
    expect(lock.has('s1')).toBe(true);
    release();
    await first;
    await expect(second).resolves.toBe(42);
    expect(log).toEqual(['first:start', 'other', 'first:end', 'second']);
    await new Promise((r) => setImmediate(r));
    expect(lock.has('s1')).toBe(false);
  });

  it('goes on with the next work after a failure, which still reaches its caller', async () => {
    const lock = new KeyedLock();
    const failed = lock.run('s', async () => {
      throw new Error('boom');
    });
    const next = lock.run('s', async () => 'ok');
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('ok');
  });
});
