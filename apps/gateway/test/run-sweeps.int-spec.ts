import { PrismaService } from '@app/persistence';
import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { RunSweepsRepository } from '../src/runs/run-sweeps.repository';

const TENANT = 'ten_sweepsweeps1';
const OTHER = 'ten_sweepsweeps2';

/**
 * The supervisor's stranded-run sweep against the real database: runs without a live claim
 * are found, across tenants, but not a queued run that only waits for an earlier run of
 * its session to end.
 */
describe('the stranded-run sweep', () => {
  let db: TestDatabase;
  let prisma: PrismaService;
  let sweeps: RunSweepsRepository;
  let seconds = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    prisma = new PrismaService({ url: db.appUrl, systemUrl: db.url });
    sweeps = new RunSweepsRepository(prisma);
    await queryDatabase(db.url, `INSERT INTO tenants (id, name) VALUES ($1, 'sweep one'), ($2, 'sweep two')`, [TENANT, OTHER]);
  });
  afterAll(async () => {
    await prisma?.close();
    await db?.drop();
  });

  async function session(tenantId: string, id: string): Promise<string> {
    await queryDatabase(db.url, `INSERT INTO sessions (id, tenant_id) VALUES ($1, $2)`, [id, tenantId]);
    return id;
  }
  /** A run without a claim, made a second after the one before (creation order is the queue's order). */
  async function run(tenantId: string, sessionId: string, id: string, status: string, extra: { parent?: string; lease?: boolean } = {}): Promise<string> {
    seconds++;
    await queryDatabase(
      db.url,
      `INSERT INTO runs (id, tenant_id, session_id, parent_run_id, status, input, created_at, lease_owner, lease_expires_at)
       VALUES ($1, $2, $3, $4, $5, 'hello', '2026-01-01T00:00:00Z'::timestamptz + $6 * interval '1 second',
               $7, CASE WHEN $7::text IS NULL THEN NULL ELSE now() + interval '1 minute' END)`,
      [id, tenantId, sessionId, extra.parent ?? null, status, seconds, extra.lease ? 'gw-a/1' : null],
    );
    return id;
  }
  const found = async () => (await sweeps.stranded(0)).map((r) => r.id).sort();

  it('finds runs nobody works on, but not a queued run waiting for its session', async () => {
    const busy = await session(TENANT, 'ses_sweep_busy');
    const lost = await run(TENANT, busy, 'run_sweep_lost', 'running');
    const waiting = await run(TENANT, busy, 'run_sweep_waiting', 'queued');
    const alsoWaiting = await run(TENANT, busy, 'run_sweep_waiting2', 'queued');
    // A sub-run never waits for its session's runs.
    const sub = await run(TENANT, busy, 'run_sweep_sub', 'queued', { parent: lost });
    const held = await run(TENANT, await session(TENANT, 'ses_sweep_held'), 'run_sweep_held', 'running', { lease: true });
    const behindHeld = await run(TENANT, 'ses_sweep_held', 'run_sweep_behind_held', 'queued');
    // Another tenant's session with a run of the same shape: its own earliest run is stranded.
    const otherLone = await run(OTHER, await session(OTHER, 'ses_sweep_other'), 'run_sweep_other', 'queued');

    expect(await found()).toEqual([lost, otherLone, sub].sort());
    expect(await found()).not.toContain(waiting);
    expect(await found()).not.toContain(held);
    expect(await found()).not.toContain(behindHeld);

    // The run before them ends (and the message that would start the next one is lost):
    // the earliest queued run of the session is stranded now, the one behind it still waits.
    await queryDatabase(db.url, `UPDATE runs SET status = 'completed' WHERE id IN ($1, $2)`, [lost, sub]);
    expect(await found()).toEqual([waiting, otherLone].sort());
    expect(await found()).not.toContain(alsoWaiting);

    // A run waiting for approval holds the queue too.
    await queryDatabase(db.url, `UPDATE runs SET status = 'requires_approval' WHERE id = $1`, [waiting]);
    expect(await found()).toEqual([waiting, otherLone].sort());
    expect(await found()).not.toContain(alsoWaiting);
  });
});
