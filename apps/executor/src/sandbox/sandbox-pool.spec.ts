import type { Logger } from 'pino';
import type { AgentChannel } from './agent-channel';
import type { DockerSandboxDriver } from './docker-sandbox.driver';
import { SandboxPool } from './sandbox-pool';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as unknown as Logger;

/** The driver at its boundary: containers made at once, removals held until the test lets each one end. */
function fakeDriver() {
  const removals: Array<{ containerId: string; done: () => void }> = [];
  const channel = {
    isOpen: true,
    ready: async () => undefined,
    call: async () => ({ is_error: false, output: '' }),
    close: () => undefined,
  } as unknown as AgentChannel;
  const driver = {
    create: async (name: string) => ({ containerId: `id-${name}`, volume: `vol-${name}` }),
    attach: async () => channel,
    remove: (ref: { containerId: string }) => new Promise<void>((resolve) => removals.push({ containerId: ref.containerId, done: resolve })),
  } as unknown as DockerSandboxDriver;
  return { driver, removals };
}

async function settle(until: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !until(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!until()) throw new Error('the pool did not get there');
}

describe('SandboxPool', () => {
  it('removes the containers it trims one after another, and counts them as its own until each is gone', async () => {
    const { driver, removals } = fakeDriver();
    const pool = new SandboxPool({ min: 4, max: 4, idleMs: 60_000 }, driver, silent, { parallel: 4 });
    let room = 4;
    pool.start(() => room);
    await settle(() => pool.ready === 4);
    const made = pool.owned().containers;

    // A full executor keeps no pool: all four are trimmed at once.
    room = 0;
    pool.trim();
    await settle(() => removals.length === 1);
    expect(pool.ready).toBe(0);
    // The sweep must not take the three still waiting (nor the one going) for leftovers.
    expect(pool.owned().containers).toEqual(made);

    for (let removed = 1; removed <= 4; removed++) {
      // Only one removal is asked of the engine at a time.
      expect(removals).toHaveLength(removed);
      const { containerId, done } = removals[removed - 1];
      done();
      await settle(() => removals.length === Math.min(4, removed + 1) && !pool.owned().containers.has(containerId));
    }
    expect(pool.owned().containers.size).toBe(0);
    await pool.drain();
  });
});
