import type { NatsClient } from '@app/messaging';
import type { StoredTenantTools } from '../tools/tenant-tools';
import { CreatedRun, LocalRunStarter, RunEnqueuer } from './run-enqueuer';
import type { RunLeasesRepository } from './run-leases.repository';
import type { RunsRepository, RunView } from './runs.repository';
import { testConfig } from './testing/in-memory-runs';

/** The enqueuer with the queue and the dispatch marks recorded, and a replica whose free workers the test sets. */
function setUp() {
  const published: Array<{ run_id: string; msgID: string }> = [];
  const dispatched: string[] = [];
  const nats = {
    publishToStream: async (_contract: unknown, payload: { run_id: string }, msgID: string) => void published.push({ run_id: payload.run_id, msgID }),
  } as unknown as NatsClient;
  const leases = { markDispatched: async (_tenantId: string, runId: string) => (dispatched.push(runId), true) } as unknown as RunLeasesRepository;
  const enqueuer = new RunEnqueuer(nats, testConfig(), {} as RunsRepository, leases);
  const startedHere: string[] = [];
  const handedRows: Array<CreatedRun | undefined> = [];
  const replica = { free: 0 };
  const starter: LocalRunStarter = {
    canStartHere: () => replica.free > 0,
    startHere: (_tenantId, runId, _sessionId, created) => {
      if (replica.free === 0) return false;
      replica.free--;
      startedHere.push(runId);
      handedRows.push(created);
      return true;
    },
  };
  return { enqueuer, starter, replica, published, dispatched, startedHere, handedRows };
}

function newRun(id: string): RunView {
  return { id, tenantId: 'ten_1', sessionId: 'ses_1', status: 'queued' } as RunView;
}

describe('RunEnqueuer', () => {
  it('starts a new run and a session\'s next run in a free worker of this replica, without a queue message', async () => {
    const { enqueuer, starter, replica, published, dispatched, startedHere, handedRows } = setUp();
    enqueuer.startLocallyWith(starter);
    replica.free = 2;
    const created = newRun('run_1');
    const storedTools: StoredTenantTools = { tenantId: 'ten_1', reads: [] };

    expect(enqueuer.startsHere()).toBe(true);
    await enqueuer.enqueueCreated(created, storedTools);
    await enqueuer.enqueue('ten_1', 'run_2', 'session_free', 'ses_1');

    expect(startedHere).toEqual(['run_1', 'run_2']);
    // The new run's row and the tool configuration read beside its creation go along, so
    // the worker reads neither again.
    expect(handedRows).toEqual([{ run: created, storedTools }, undefined]);
    expect(published).toEqual([]);
    expect(dispatched).toEqual([]);
  });

  it('queues the run when this replica has no worker to spare, or does not consume the queue', async () => {
    const { enqueuer, starter, published, startedHere } = setUp();
    expect(enqueuer.startsHere()).toBe(false);
    await enqueuer.enqueueCreated(newRun('run_1'));
    enqueuer.startLocallyWith(starter);
    expect(enqueuer.startsHere()).toBe(false);
    await enqueuer.enqueueCreated(newRun('run_2'));

    expect(startedHere).toEqual([]);
    expect(published).toEqual([
      { run_id: 'run_1', msgID: 'run_1' },
      { run_id: 'run_2', msgID: 'run_2' },
    ]);
  });

  it('always queues resumed, stranded and handed-back runs, so any replica may take them', async () => {
    const { enqueuer, starter, replica, published, dispatched, startedHere } = setUp();
    enqueuer.startLocallyWith(starter);
    replica.free = 10;

    for (const reason of ['approval', 'stranded', 'handover'] as const) await enqueuer.enqueue('ten_1', `run_${reason}`, reason);

    expect(startedHere).toEqual([]);
    expect(published.map((p) => p.run_id)).toEqual(['run_approval', 'run_stranded', 'run_handover']);
    expect(dispatched).toEqual(['run_approval', 'run_stranded', 'run_handover']);
  });
});
