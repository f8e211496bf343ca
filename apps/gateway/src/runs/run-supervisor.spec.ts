import type { RunControlService } from './run-control.service';
import type { RunEnqueuer } from './run-enqueuer';
import { RunSupervisor } from './run-supervisor';
import type { RunSweepsRepository } from './run-sweeps.repository';
import { silentLogger, testConfig } from './testing/in-memory-runs';

const LEASE_SECONDS = 4;

describe('RunSupervisor', () => {
  beforeEach(() => jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') }));
  afterEach(() => jest.useRealTimers());

  it('after Postgres was away, leaves lapsed claims a lease to be renewed before it re-queues their runs as stranded', async () => {
    let down = false;
    const stranded = jest.fn(async () => [{ tenantId: 'ten_1', id: 'run_1', dispatchedAt: null }]);
    const sweeps = {
      expiredApprovals: async () => {
        if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        return [];
      },
      stranded,
    } as unknown as RunSweepsRepository;
    const requeue = jest.fn(async () => true);
    const supervisor = new RunSupervisor(sweeps, {} as RunControlService, { requeue } as unknown as RunEnqueuer, testConfig({ RUNBOX_RUN_LEASE_SECONDS: LEASE_SECONDS, RUNBOX_RUN_SWEEP_SECONDS: 1 }), silentLogger);
    supervisor.onApplicationBootstrap();

    await jest.advanceTimersByTimeAsync(1_000);
    expect(requeue).toHaveBeenCalledTimes(1); // no outage: a stranded run goes back on the queue

    down = true;
    await jest.advanceTimersByTimeAsync(3_000);
    down = false;
    requeue.mockClear();
    stranded.mockClear();
    await jest.advanceTimersByTimeAsync(LEASE_SECONDS * 1000 - 1_000);
    expect(stranded).not.toHaveBeenCalled();
    expect(requeue).not.toHaveBeenCalled();

    await jest.advanceTimersByTimeAsync(2_000);
    expect(requeue).toHaveBeenCalled();
    await supervisor.onApplicationShutdown();
  });
});
