import { PrismaService } from '@app/persistence';
import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { RunLeasesRepository } from '../src/runs/run-leases.repository';
import { RunsRepository, RunView } from '../src/runs/runs.repository';

const TENANT = 'ten_pickuppickup';
const LEASE_MS = 30_000;

/**
 * Picking up a queued run against the real database: the claim only reads it, and the start
 * takes the lease under the run's lock, so two workers that pick the run up at once start it
 * once between them.
 */
describe('picking up a queued run', () => {
  let db: TestDatabase;
  let prisma: PrismaService;
  let leases: RunLeasesRepository;
  let runs: RunsRepository;
  let ids = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    prisma = new PrismaService({ url: db.appUrl, systemUrl: db.url });
    leases = new RunLeasesRepository(prisma);
    runs = new RunsRepository(prisma);
    await queryDatabase(db.url, `INSERT INTO tenants (id, name) VALUES ($1, 'pickup')`, [TENANT]);
  });
  afterAll(async () => {
    await prisma?.close();
    await db?.drop();
  });

  /** A queued run in a session of its own. */
  async function queuedRun(): Promise<string> {
    const n = ++ids;
    await queryDatabase(db.url, `INSERT INTO sessions (id, tenant_id) VALUES ($1, $2)`, [`ses_pickup${n}`, TENANT]);
    await queryDatabase(db.url, `INSERT INTO runs (id, tenant_id, session_id, status, input) VALUES ($1, $2, $3, 'queued', 'hello')`, [`run_pickup${n}`, TENANT, `ses_pickup${n}`]);
    return `run_pickup${n}`;
  }
  const leaseOf = async (runId: string) =>
    (await queryDatabase<{ lease_owner: string | null; status: string }>(db.url, `SELECT lease_owner, status FROM runs WHERE id = $1`, [runId]))[0];
  async function claimed(runId: string, owner: string): Promise<RunView> {
    const claim = await leases.claim(TENANT, runId, owner, LEASE_MS);
    if (claim.kind !== 'claimed') throw new Error(`expected the run claimed, got ${claim.kind}`);
    return claim.run;
  }

  it('reads a queued run without taking its lease; the start takes it', async () => {
    const id = await queuedRun();
    const run = await claimed(id, 'gw-a/1');
    expect(run.status).toBe('queued');
    expect(await leaseOf(id)).toEqual({ lease_owner: null, status: 'queued' });

    const started = await runs.start(TENANT, run, {}, undefined, { owner: 'gw-a/1', ms: LEASE_MS });

    expect(started.kind).toBe('started');
    expect(await leaseOf(id)).toEqual({ lease_owner: 'gw-a/1', status: 'running' });
    // Once it runs, another worker's claim finds it held.
    expect(await leases.claim(TENANT, id, 'gw-b/1', LEASE_MS)).toMatchObject({ kind: 'held' });
  });

  it('starts a run two workers picked up at once for one of them only', async () => {
    const id = await queuedRun();
    const [a, b] = await Promise.all([claimed(id, 'gw-a/2'), claimed(id, 'gw-b/2')]);

    const outcomes = await Promise.all([
      runs.start(TENANT, a, {}, undefined, { owner: 'gw-a/2', ms: LEASE_MS }),
      runs.start(TENANT, b, {}, undefined, { owner: 'gw-b/2', ms: LEASE_MS }),
    ]);

    expect(outcomes.map((o) => o.kind).sort()).toEqual(['not_queued', 'started']);
    const winner = outcomes[0].kind === 'started' ? 'gw-a/2' : 'gw-b/2';
    expect(await leaseOf(id)).toEqual({ lease_owner: winner, status: 'running' });
    const [{ n }] = await queryDatabase<{ n: number }>(db.url, `SELECT count(*)::int AS n FROM run_events WHERE run_id = $1 AND type = 'run.started'`, [id]);
    expect(n).toBe(1);
  });

  it('leaves a queued run another worker holds a live lease on to that worker', async () => {
    const id = await queuedRun();
    // gw-a's heartbeat took the lease while its start was still to come.
    const run = await claimed(id, 'gw-a/3');
    expect(await leases.renewLease(TENANT, id, 'gw-a/3', LEASE_MS)).toBe('queued');
    expect(await leaseOf(id)).toEqual({ lease_owner: 'gw-a/3', status: 'queued' });

    expect(await leases.claim(TENANT, id, 'gw-b/3', LEASE_MS)).toMatchObject({ kind: 'held' });
    expect(await leases.renewLease(TENANT, id, 'gw-b/3', LEASE_MS)).toBeNull();
    expect((await runs.start(TENANT, run, {}, undefined, { owner: 'gw-b/3', ms: LEASE_MS })).kind).toBe('not_queued');
    expect((await runs.start(TENANT, run, {}, undefined, { owner: 'gw-a/3', ms: LEASE_MS })).kind).toBe('started');
  });

  it('claims a run that is not queued with its lease, as before', async () => {
    const id = await queuedRun();
    await queryDatabase(db.url, `UPDATE runs SET status = 'running' WHERE id = $1`, [id]);

    await claimed(id, 'gw-a/4');

    expect(await leaseOf(id)).toEqual({ lease_owner: 'gw-a/4', status: 'running' });
  });
});
