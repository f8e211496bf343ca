import type { EventContract } from '@app/contracts';
import { decodeJson, jsonCodec, NatsClient } from '@app/messaging';
import type { JsMsg } from 'nats';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { StoredTenantTools } from '../tools/tenant-tools';
import { abortKind, RunAbort } from './run-abort';
import type { ExecuteOptions, RunLoop, RunOutcome } from './run-loop';
import type { LocalRunStarter, RunEnqueuer } from './run-enqueuer';
import type { RunLeasesRepository } from './run-leases.repository';
import { RunWorkers } from './run-workers';
import type { RunToolSelection } from './run-tools';
import { InMemoryRuns, silentLogger, testConfig } from './testing/in-memory-runs';

const LEASE_MS = 30_000;
/** Stands for a caller's async context (a request's, a tenant transaction's scope). */
const callerContext = new AsyncLocalStorage<string>();

/** The run-queue messages one consumer delivers, pushed by the test. */
class MessageFeed implements AsyncIterable<JsMsg> {
  private readonly waiting: JsMsg[] = [];
  private next?: (result: IteratorResult<JsMsg>) => void;
  private closed = false;

  push(msg: JsMsg): void {
    if (this.next) this.next({ value: msg, done: false });
    else this.waiting.push(msg);
    this.next = undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.next?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<JsMsg> {
    return {
      next: () => {
        const msg = this.waiting.shift();
        if (msg) return Promise.resolve({ value: msg, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.next = resolve));
      },
    };
  }
}

/** A queue message that records what the worker did with it; `settled` resolves on ack, nak or term. */
function queueMessage(payload: unknown) {
  const seen = { working: 0, outcome: undefined as undefined | 'ack' | 'term' | { nak: number | undefined } };
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => (settle = resolve));
  const end = (outcome: typeof seen.outcome) => {
    seen.outcome = outcome;
    settle();
  };
  const msg = {
    data: jsonCodec.encode(payload),
    info: { deliveryCount: 1 },
    ack: () => end('ack'),
    nak: (delay?: number) => end({ nak: delay }),
    term: () => end('term'),
    working: () => {
      seen.working++;
    },
  };
  return { msg: msg as unknown as JsMsg, seen, settled };
}

/** A run loop that hands each execution to the test, which ends it (or lets an abort end it). */
class ControlledLoop {
  readonly executions: Array<{ runId: string; signal: AbortSignal; options: ExecuteOptions; finish: (outcome: RunOutcome) => void; fail: (err: Error) => void }> = [];
  private waiter?: () => void;

  execute = (run: { id: string }, signal: AbortSignal, options: ExecuteOptions): Promise<RunOutcome> =>
    new Promise((resolve, reject) => {
      // Like the real loop: a stopped worker returns `aborted`.
      signal.addEventListener('abort', () => resolve('aborted'), { once: true });
      this.executions.push({ runId: run.id, signal, options, finish: resolve, fail: reject });
      this.waiter?.();
    });

  /** Resolves once the loop was asked to execute `count` runs in all. */
  started(count = 1): Promise<void> {
    if (this.executions.length >= count) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiter = () => {
        if (this.executions.length >= count) resolve();
      };
    });
  }
}

function setUp() {
  const store = new InMemoryRuns();
  const feed = new MessageFeed();
  let onCancel: ((msg: { run_id: string }) => void) | undefined;
  // The messaging adapter at its boundary: a cancel subscription, the run consumer, and the
  // contract check of a pulled message.
  const nats = {
    subscribe: (_contract: unknown, onMessage: typeof onCancel) => {
      onCancel = onMessage;
      return { unsubscribe: () => undefined };
    },
    consumer: async () => ({ consume: async () => feed }),
    parseEvent: <T>(contract: EventContract<T>, data: Uint8Array): T | null => {
      const parsed = contract.payload.safeParse(decodeJson(data));
      return parsed.success ? parsed.data : null;
    },
  } as unknown as NatsClient;
  const loop = new ControlledLoop();
  // The lease repository as Postgres serves it, or refuses while `outage.down` (a restart).
  const outage = { down: false };
  const leases = store.leasesRepository();
  const reachable = new Proxy(leases, {
    get: (target, key: keyof RunLeasesRepository) => {
      const member = target[key];
      if (typeof member !== 'function') return member;
      return (...args: unknown[]) => (outage.down ? Promise.reject(databaseDown()) : (member as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
  // A session's tenant tools, listed beside the claim (the loop here does not look at them).
  // Each listing notes the async context the run's work runs in, and what it was read from.
  const listedIn: Array<string | undefined> = [];
  const listedFrom: Array<StoredTenantTools | undefined> = [];
  const tenantTools = {
    listTenantTools: (_tenantId: string, _sessionId: string, _signal: AbortSignal, stored?: StoredTenantTools) => {
      listedIn.push(callerContext.getStore());
      listedFrom.push(stored);
      return Promise.resolve({});
    },
  } as unknown as RunToolSelection;
  // The enqueuer as far as the workers use it: they offer themselves for local starts, and
  // hand a run started here back to the queue.
  const handedBack: Array<{ runId: string; reason: string }> = [];
  const local: { starter?: LocalRunStarter } = {};
  const enqueuer = {
    startLocallyWith: (starter: LocalRunStarter) => (local.starter = starter),
    enqueue: async (_tenantId: string, runId: string, reason: string) => void handedBack.push({ runId, reason }),
  } as unknown as RunEnqueuer;
  const workers = new RunWorkers(nats, testConfig({ RUNBOX_RUN_LEASE_SECONDS: LEASE_MS / 1000 }), loop as unknown as RunLoop, reachable, tenantTools, enqueuer, silentLogger);
  const deliver = (runId: string, tenantId = 'ten_1') => {
    const message = queueMessage({ tenant_id: tenantId, run_id: runId });
    feed.push(message.msg);
    return message;
  };
  const cancel = (runId: string) => onCancel?.({ run_id: runId });
  return { store, feed, loop, workers, deliver, cancel, outage, handedBack, local, listedIn, listedFrom };
}

function databaseDown(): Error {
  return new Error('connect ECONNREFUSED 127.0.0.1:5432');
}

describe('RunWorkers', () => {
  beforeEach(() => jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') }));
  afterEach(() => jest.useRealTimers());

  it("leaves a run whose claim another worker holds, to look again when that claim would lapse", async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running', leaseOwner: 'other-worker/1', leaseExpiresAt: Date.now() + 20_000 });
    await workers.onApplicationBootstrap();

    const message = deliver(run.id);
    await message.settled;

    expect(message.seen.outcome).toEqual({ nak: 20_500 });
    expect(loop.executions).toEqual([]);
    expect(store.run(run.id).leaseOwner).toBe('other-worker/1');
    await workers.beforeApplicationShutdown();
  });

  it('takes over a run whose worker stopped heartbeating, counted as a recovery, and resumes it', async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running', leaseOwner: 'dead-worker/1', leaseExpiresAt: Date.now() - 1, recoveries: 1 });
    await workers.onApplicationBootstrap();

    const message = deliver(run.id);
    await loop.started();
    expect(loop.executions[0].options).toMatchObject({ recovered: true, recoveries: 2, afterOutage: false });
    expect(store.run(run.id).leaseOwner).toMatch(new RegExp(`^${workers.workerId}/`));
    expect(store.run(run.id).leaseExpiresAt).toBe(Date.now() + LEASE_MS);

    loop.executions[0].finish('parked');
    await message.settled;
    expect(message.seen.outcome).toBe('ack');
    await workers.beforeApplicationShutdown(); // waits for the worker to let go
    expect(store.run(run.id).leaseOwner).toBeNull();
  });

  it('sends no release after a run that ended: its ending cleared the lease already', async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();
    const owner = store.run(run.id).leaseOwner;
    expect(owner).toMatch(new RegExp(`^${workers.workerId}/`));

    loop.executions[0].finish('finished');
    await message.settled;
    await workers.beforeApplicationShutdown();
    expect(message.seen.outcome).toBe('ack');
    // The fake loop ended nothing, so a release would have cleared the claim.
    expect(store.run(run.id).leaseOwner).toBe(owner);
  });

  it('renews the claim with each heartbeat and stops the run once another worker has taken it', async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();

    await jest.advanceTimersByTimeAsync(LEASE_MS / 3);
    expect(message.seen.working).toBe(1);
    expect(store.run(run.id).leaseExpiresAt).toBe(Date.now() + LEASE_MS);
    expect(loop.executions[0].signal.aborted).toBe(false);

    // This worker stalled; its claim lapsed and another worker took the run.
    store.run(run.id).leaseOwner = 'other-worker/2';
    await jest.advanceTimersByTimeAsync(LEASE_MS / 3);

    expect(abortKind(loop.executions[0].signal)).toBe('lease_lost');
    await message.settled;
    expect(message.seen.outcome).toBe('ack');
    expect(store.run(run.id).leaseOwner).toBe('other-worker/2');
    await workers.beforeApplicationShutdown();
  });

  it('rides out a database outage mid-run: keeps the run, takes it up again with the same claim once the database answers, and goes on', async () => {
    const { store, loop, workers, deliver, outage } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();
    const owner = store.run(run.id).leaseOwner;

    outage.down = true;
    loop.executions[0].fail(databaseDown());
    await jest.advanceTimersByTimeAsync(LEASE_MS / 3 + 5_000);
    // Waiting: the message is kept alive, nothing is handed back, nothing runs twice.
    expect(loop.executions).toHaveLength(1);
    expect(message.seen.outcome).toBeUndefined();
    expect(message.seen.working).toBeGreaterThan(0);

    outage.down = false;
    await jest.advanceTimersByTimeAsync(1_000);
    await loop.started(2);
    expect(loop.executions[1].options).toMatchObject({ afterOutage: true, recovered: false });
    expect(store.run(run.id).leaseOwner).toBe(owner);
    loop.executions[1].finish('finished');
    await message.settled;
    expect(message.seen.outcome).toBe('ack');
    await workers.beforeApplicationShutdown();
  });

  it('after an outage, lets go of a run another worker took over meanwhile', async () => {
    const { store, loop, workers, deliver, outage } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();

    outage.down = true;
    loop.executions[0].fail(databaseDown());
    await jest.advanceTimersByTimeAsync(2_000);
    Object.assign(store.run(run.id), { leaseOwner: 'other-worker/4', leaseExpiresAt: Date.now() + LEASE_MS });
    outage.down = false;
    await jest.advanceTimersByTimeAsync(1_000);

    await message.settled;
    expect(loop.executions).toHaveLength(1);
    expect(store.run(run.id).leaseOwner).toBe('other-worker/4');
    await workers.beforeApplicationShutdown();
  });

  it("gives the loop a claim check that says (and stops the run) when another worker holds the run", async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();
    const { holdClaim } = loop.executions[0].options;

    expect(await holdClaim?.()).toBe(true);
    store.run(run.id).leaseOwner = 'other-worker/5';
    expect(await holdClaim?.()).toBe(false);
    expect(abortKind(loop.executions[0].signal)).toBe('lease_lost');
    await message.settled;
    await workers.beforeApplicationShutdown();
  });

  it('stops a run it executes when a cancel notice for it arrives', async () => {
    const { store, loop, workers, deliver, cancel } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();

    cancel('run_other');
    expect(loop.executions[0].signal.aborted).toBe(false);
    cancel(run.id);

    expect(loop.executions[0].signal.reason).toEqual(new RunAbort('cancel'));
    await message.settled;
    await workers.beforeApplicationShutdown();
  });

  it('on shutdown lets go of its runs and puts their messages straight back on the queue', async () => {
    const { store, loop, workers, deliver } = setUp();
    const run = store.addRun({ status: 'running' });
    await workers.onApplicationBootstrap();
    const message = deliver(run.id);
    await loop.started();

    await workers.beforeApplicationShutdown();

    expect(abortKind(loop.executions[0].signal)).toBe('shutdown');
    expect(message.seen.outcome).toEqual({ nak: undefined });
    expect(store.run(run.id).leaseOwner).toBeNull();
  });

  it('drops a message that is not a run-queue message', async () => {
    const { feed, loop, workers } = setUp();
    await workers.onApplicationBootstrap();
    const message = queueMessage({ hello: 'world' });

    feed.push(message.msg);
    await message.settled;

    expect(message.seen.outcome).toBe('term');
    expect(loop.executions).toEqual([]);
    await workers.beforeApplicationShutdown();
  });

  describe('starting a run on the replica where it became ready', () => {
    it('offers its workers to the enqueuer once it consumes the queue', async () => {
      const { workers, local } = setUp();
      expect(local.starter).toBeUndefined();
      await workers.onApplicationBootstrap();
      expect(local.starter).toBe(workers);
      await workers.beforeApplicationShutdown();
    });

    it('executes a run handed to it in a free worker, claimed like any other, with no queue message', async () => {
      const { store, loop, workers, handedBack, listedIn } = setUp();
      await workers.onApplicationBootstrap();
      const run = store.addRun();

      expect(callerContext.run('the request that made it', () => workers.startHere(run.tenantId, run.id, run.sessionId))).toBe(true);
      await loop.started();

      expect(loop.executions[0].runId).toBe(run.id);
      // Its work does not run in the caller's context (whose transaction scope is not the run's).
      expect(listedIn).toEqual([undefined]);
      expect(loop.executions[0].options.lease).toEqual({ owner: expect.stringMatching(new RegExp(`^${workers.workerId}/`)), ms: LEASE_MS });
      loop.executions[0].finish('finished');
      await jest.advanceTimersByTimeAsync(0);
      expect(handedBack).toEqual([]);
      await workers.beforeApplicationShutdown();
    });

    it('does not read a new run again: it goes to the loop as its creation returned it, listed from the tools read beside it', async () => {
      const { store, loop, workers, listedFrom } = setUp();
      await workers.onApplicationBootstrap();
      const run = store.addRun();
      const storedTools: StoredTenantTools = { tenantId: run.tenantId, reads: [] };

      workers.startHere(run.tenantId, run.id, run.sessionId, { run: store.view(run.id), storedTools });
      await loop.started();

      expect(loop.executions[0].runId).toBe(run.id);
      expect(store.repositoryCalls).not.toContain('claim');
      expect(listedFrom).toEqual([storedTools]);
      await workers.beforeApplicationShutdown();
    });

    it('takes no reserved worker: with only the reserve free, the run goes on the queue', async () => {
      const { store, loop, workers, deliver } = setUp();
      await workers.onApplicationBootstrap();
      [1, 2].map(() => deliver(store.addRun().id));
      await loop.started(2);
      const third = store.addRun({ tenantId: 'ten_2' });
      expect(workers.startHere('ten_2', third.id)).toBe(true);
      await loop.started(3);

      // 4 workers, 1 reserved: the last free one is the reserve, even for another tenant.
      expect(workers.canStartHere()).toBe(false);
      expect(workers.startHere('ten_3', store.addRun({ tenantId: 'ten_3' }).id)).toBe(false);
      expect(loop.executions).toHaveLength(3);
      await workers.beforeApplicationShutdown();
    });

    it('hands a run started here back to the queue when it stops, and takes none while stopping', async () => {
      const { store, loop, workers, handedBack } = setUp();
      await workers.onApplicationBootstrap();
      const run = store.addRun();
      workers.startHere(run.tenantId, run.id, run.sessionId);
      await loop.started();

      await workers.beforeApplicationShutdown();

      expect(abortKind(loop.executions[0].signal)).toBe('shutdown');
      expect(handedBack).toEqual([{ runId: run.id, reason: 'handover' }]);
      expect(store.run(run.id).leaseOwner).toBeNull();
      expect(workers.startHere(run.tenantId, store.addRun().id)).toBe(false);
    });

    it('hands a run started here back to the queue when the database is away as it is claimed', async () => {
      const { store, loop, workers, handedBack, outage } = setUp();
      await workers.onApplicationBootstrap();
      const run = store.addRun();
      outage.down = true;

      workers.startHere(run.tenantId, run.id, run.sessionId);
      await jest.advanceTimersByTimeAsync(0);

      expect(handedBack).toEqual([{ runId: run.id, reason: 'handover' }]);
      expect(loop.executions).toEqual([]);
      await workers.beforeApplicationShutdown();
    });
  });

  // testConfig has 4 workers: 1 reserved, so a tenant alone runs 3 at once.
  describe('sharing workers between tenants', () => {
    /** A worker pool whose tenant ten_1 holds its whole share: three runs executing. */
    async function setUpWithShareFilled() {
      const fixture = setUp();
      await fixture.workers.onApplicationBootstrap();
      const running = [1, 2, 3].map(() => fixture.deliver(fixture.store.addRun().id));
      await fixture.loop.started(3);
      return { ...fixture, running };
    }

    it("parks a run that would take the reserved worker, and starts it the moment a worker outside the reserve frees up", async () => {
      const { store, loop, workers, deliver, running } = await setUpWithShareFilled();

      const fourth = store.addRun();
      const parked = deliver(fourth.id);
      await jest.advanceTimersByTimeAsync(0);
      expect(loop.executions).toHaveLength(3);
      expect(parked.seen).toEqual({ working: 1, outcome: undefined });

      // No timer runs: the run ending is what starts the parked one.
      loop.executions[0].finish('finished');
      await running[0].settled;
      await loop.started(4);
      expect(loop.executions[3].runId).toBe(fourth.id);
      expect(parked.seen.outcome).toBeUndefined();
      await workers.beforeApplicationShutdown();
    });

    it('puts a parked run back on the queue when its wait is over, so any replica may take it', async () => {
      const { store, loop, workers, deliver } = await setUpWithShareFilled();

      const parked = deliver(store.addRun().id);
      await jest.advanceTimersByTimeAsync(499);
      expect(parked.seen.outcome).toBeUndefined();
      await jest.advanceTimersByTimeAsync(1);

      expect(parked.seen.outcome).toEqual({ nak: undefined });
      // A worker that frees up later has nothing parked to start.
      loop.executions[0].finish('finished');
      await jest.advanceTimersByTimeAsync(0);
      expect(loop.executions).toHaveLength(3);
      await workers.beforeApplicationShutdown();
    });

    it('parks no more runs than it reserves workers: the next goes back on the queue with its delay', async () => {
      const { store, workers, deliver } = await setUpWithShareFilled();

      const parked = deliver(store.addRun().id);
      const queued = deliver(store.addRun().id);
      await queued.settled;

      expect(queued.seen.outcome).toEqual({ nak: 500 });
      expect(parked.seen.outcome).toBeUndefined();
      await workers.beforeApplicationShutdown();
      expect(parked.seen.outcome).toEqual({ nak: undefined });
    });

    it("gives the reserved worker to another tenant's run while one of the first tenant's waits parked", async () => {
      const { store, loop, workers, deliver } = await setUpWithShareFilled();
      const parked = deliver(store.addRun().id);
      await jest.advanceTimersByTimeAsync(0);

      const other = store.addRun({ tenantId: 'ten_2' });
      deliver(other.id, 'ten_2');
      await loop.started(4);

      expect(loop.executions[3].runId).toBe(other.id);
      expect(parked.seen.outcome).toBeUndefined();
      await workers.beforeApplicationShutdown();
    });
  });

  describe('executing a sub-run inline, in its parent worker', () => {
    it('claims it, executes it, and lets the claim go', async () => {
      const { store, loop, workers } = setUp();
      const sub = store.addRun({ status: 'queued', parentRunId: 'run_parent', depth: 1 });

      const outcome = workers.executeInline('ten_1', sub.id, new AbortController().signal);
      await loop.started();
      // A queued run's claim is a read: its start takes the lease, for the claim's owner.
      expect(loop.executions[0].options.lease).toEqual({ owner: expect.stringMatching(new RegExp(`^${workers.workerId}/`)), ms: LEASE_MS });
      loop.executions[0].finish('finished');

      expect(await outcome).toBe('finished');
      expect(store.run(sub.id).leaseOwner).toBeNull();
    });

    it("stops it when the parent's worker stops, and says so when another worker holds it", async () => {
      const { store, loop, workers } = setUp();
      const sub = store.addRun({ status: 'running', parentRunId: 'run_parent', depth: 1 });
      const parent = new AbortController();

      const outcome = workers.executeInline('ten_1', sub.id, parent.signal);
      await loop.started();
      parent.abort(new RunAbort('cancel'));
      expect(await outcome).toBe('aborted');

      store.run(sub.id).leaseOwner = 'other-worker/3';
      store.run(sub.id).leaseExpiresAt = Date.now() + LEASE_MS;
      expect(await workers.executeInline('ten_1', sub.id, new AbortController().signal)).toBe('held');
    });
  });
});
