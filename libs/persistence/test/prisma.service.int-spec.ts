import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { PrismaService } from '../src/prisma.service';

/** PrismaService against a real database, as the services' roles. */
describe('PrismaService', () => {
  let db: TestDatabase;
  let prisma: PrismaService;

  beforeAll(async () => {
    db = await createTestDatabase();
    prisma = new PrismaService({ url: db.appUrl, systemUrl: db.url });
    await queryDatabase(db.url, `INSERT INTO tenants (id, name) VALUES ('ten_aaaaaaaaaa', 'a'), ('ten_bbbbbbbbbb', 'b')`);
  });
  afterAll(async () => {
    await prisma?.close();
    await db?.drop();
  });

  const sessionsOf = (tenantId: string) =>
    queryDatabase<{ id: string }>(db.url, 'SELECT id FROM sessions WHERE tenant_id = $1 ORDER BY id', [tenantId]).then((rows) => rows.map((r) => r.id));
  const newSession = (tenantId: string, id: string) => prisma.tenant(tenantId, (tx) => tx.session.create({ data: { id, tenantId } }));

  it('keeps work waiting for a connection of a full pool longer than a new connection may take to open', async () => {
    const onePool = new PrismaService({ url: db.appUrl, systemUrl: db.url }, { tenant: 1, system: 1 });
    try {
      let entered!: () => void;
      const holding = new Promise<void>((resolve) => (entered = resolve));
      // The pool's only connection, held past the 5 s a new connection is given to open.
      const holder = onePool.tenant('ten_aaaaaaaaaa', async (tx) => {
        entered();
        await tx.$executeRaw`SELECT pg_sleep(6)`;
      });
      await holding;
      const waiter = onePool.tenant('ten_aaaaaaaaaa', (tx) => tx.$queryRaw<Array<{ one: number }>>`SELECT 1 AS one`);
      await expect(waiter).resolves.toEqual([{ one: 1 }]);
      await holder;
    } finally {
      await onePool.close();
    }
  }, 30_000);

  it('shows tenant work only its tenant’s rows, and system work every row', async () => {
    await newSession('ten_aaaaaaaaaa', 'ses_visible_to_a');
    await newSession('ten_bbbbbbbbbb', 'ses_visible_to_b');
    const seenByA = await prisma.tenant('ten_aaaaaaaaaa', (tx) => tx.session.findMany({ select: { id: true } }));
    expect(seenByA.map((s) => s.id)).toEqual(['ses_visible_to_a']);
    const seenBySystem = await prisma.system((tx) => tx.session.findMany({ select: { id: true }, orderBy: { id: 'asc' } }));
    expect(seenBySystem.map((s) => s.id)).toEqual(['ses_visible_to_a', 'ses_visible_to_b']);
  });

  it('refuses to write a row of another tenant', async () => {
    await expect(prisma.tenant('ten_aaaaaaaaaa', (tx) => tx.session.create({ data: { id: 'ses_forged', tenantId: 'ten_bbbbbbbbbb' } }))).rejects.toThrow(
      /row-level security/,
    );
  });

  it('joins nested tenant work to the outer transaction: one commit, one rollback', async () => {
    await prisma.tenant('ten_aaaaaaaaaa', async () => {
      await newSession('ten_aaaaaaaaaa', 'ses_nested_1');
      // The outer transaction sees the nested write before anything is committed.
      const seen = await prisma.tenant('ten_aaaaaaaaaa', (tx) => tx.session.count({ where: { id: 'ses_nested_1' } }));
      expect(seen).toBe(1);
      expect(await sessionsOf('ten_aaaaaaaaaa')).not.toContain('ses_nested_1');
    });
    expect(await sessionsOf('ten_aaaaaaaaaa')).toContain('ses_nested_1');

    await expect(
      prisma.tenant('ten_aaaaaaaaaa', async () => {
        await newSession('ten_aaaaaaaaaa', 'ses_nested_2');
        throw new Error('refused after the nested write');
      }),
    ).rejects.toThrow('refused');
    expect(await sessionsOf('ten_aaaaaaaaaa')).not.toContain('ses_nested_2');
  });

  it('confines a failed nested block to its savepoint, so the outer work can go on', async () => {
    await prisma.tenant('ten_aaaaaaaaaa', async () => {
      await newSession('ten_aaaaaaaaaa', 'ses_kept');
      await expect(
        prisma.tenant('ten_aaaaaaaaaa', async (tx) => {
          await tx.session.create({ data: { id: 'ses_undone', tenantId: 'ten_aaaaaaaaaa' } });
          await tx.session.create({ data: { id: 'ses_kept', tenantId: 'ten_aaaaaaaaaa' } }); // duplicate key
        }),
      ).rejects.toThrow();
      await newSession('ten_aaaaaaaaaa', 'ses_after');
    });
    const ids = await sessionsOf('ten_aaaaaaaaaa');
    expect(ids).toEqual(expect.arrayContaining(['ses_kept', 'ses_after']));
    expect(ids).not.toContain('ses_undone');
  });

  it('runs sibling nested blocks one at a time', async () => {
    await prisma.tenant('ten_aaaaaaaaaa', () => Promise.all([1, 2, 3, 4].map((i) => newSession('ten_aaaaaaaaaa', `ses_sibling_${i}`))));
    expect((await sessionsOf('ten_aaaaaaaaaa')).filter((id) => id.startsWith('ses_sibling_'))).toHaveLength(4);
  });

  it('refuses another tenant’s work inside a tenant transaction', async () => {
    await expect(prisma.tenant('ten_aaaaaaaaaa', () => prisma.tenant('ten_bbbbbbbbbb', (tx) => tx.session.count()))).rejects.toThrow(
      /inside tenant ten_aaaaaaaaaa/,
    );
  });

  it('gives work that outlives its transaction a transaction of its own', async () => {
    let late: Promise<unknown> = Promise.resolve();
    await prisma.tenant('ten_aaaaaaaaaa', async () => {
      late = new Promise((resolve) => setTimeout(resolve, 20)).then(() => newSession('ten_aaaaaaaaaa', 'ses_late'));
    });
    await late;
    expect(await sessionsOf('ten_aaaaaaaaaa')).toContain('ses_late');
  });
});
