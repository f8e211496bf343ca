import { BatchingQueue } from './batching-queue';

/** A batch job that waits until released, and records the batches it was given. */
function gatedWork() {
  const batches: string[][] = [];
  const gates: Array<() => void> = [];
  let fail: Error | undefined;
  const work = async (items: string[]) => {
    batches.push(items);
    await new Promise<void>((resolve) => gates.push(resolve));
    if (fail) throw fail;
    return items.map((item) => `made ${item}`);
  };
  return {
    work,
    batches,
    release: async () => {
      gates.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    },
    failNext: (err: Error | undefined) => (fail = err),
  };
}

describe('BatchingQueue', () => {
  it('starts a request at once while a slot is free, and batches those that arrive while all are busy', async () => {
    const job = gatedWork();
    const queue = new BatchingQueue(job.work, { concurrency: 2, maxBatch: 16 });
    const results = ['a', 'b', 'c', 'd', 'e'].map((item) => queue.run(item));
    expect(job.batches).toEqual([['a'], ['b']]);
    await job.release();
    expect(job.batches).toEqual([['a'], ['b'], ['c', 'd', 'e']]);
    await job.release();
    await job.release();
    expect(await Promise.all(results)).toEqual(['made a', 'made b', 'made c', 'made d', 'made e']);
  });

  it('never puts more than maxBatch requests, or requests of different kinds, in one batch', async () => {
    const job = gatedWork();
    const queue = new BatchingQueue(job.work, { concurrency: 1, maxBatch: 2, kindOf: (item: string) => item[0] });
    const results = ['x0', 'a1', 'b1', 'a2', 'a3'].map((item) => queue.run(item));
    for (let i = 0; i < 4; i++) await job.release();
    expect(job.batches).toEqual([['x0'], ['a1', 'a2'], ['b1'], ['a3']]);
    await Promise.all(results);
  });

  it('fails every request of a failed batch, and goes on with the next one', async () => {
    const job = gatedWork();
    const queue = new BatchingQueue(job.work, { concurrency: 1, maxBatch: 16 });
    const settled = (p: Promise<string>) => p.then((value) => value, (err: Error) => `failed: ${err.message}`);
    const first = settled(queue.run('a'));
    const failing = [settled(queue.run('b')), settled(queue.run('c'))];
    await job.release();
    expect(await first).toBe('made a');
    job.failNext(new Error('helper failed'));
    const later = settled(queue.run('d'));
    await job.release();
    expect(await Promise.all(failing)).toEqual(['failed: helper failed', 'failed: helper failed']);
    job.failNext(undefined);
    await job.release();
    expect(await later).toBe('made d');
    expect(job.batches).toEqual([['a'], ['b', 'c'], ['d']]);
  });
});
