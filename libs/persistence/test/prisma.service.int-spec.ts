import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { Prisma } from '@prisma/client';
import { DatabaseError } from 'pg';
import { PrismaService } from '../src/prisma.service';
import { isUniqueViolation } from '../src/unique-violation';

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
  describe('raw SQL transactions (tenantSql, tenantRead)', () => {
    const idsIn = (rows: Array<{ id: string }>) => rows.map((r) => r.id).sort();

    it('hold the tenant to its rows, for reads and for writes', async () => {
      await newSession('ten_aaaaaaaaaa', 'ses_raw_a');
      await newSession('ten_bbbbbbbbbb', 'ses_raw_b');
      const readAll = Prisma.sql`SELECT id FROM sessions WHERE id LIKE 'ses_raw_%'`;
      expect(idsIn(await prisma.tenantSql('ten_aaaaaaaaaa', (sql) => sql.query<{ id: string }>(readAll)))).toEqual(['ses_raw_a']);
      expect(idsIn(await prisma.tenantRead<{ id: string }>('ten_bbbbbbbbbb', readAll))).toEqual(['ses_raw_b']);
      await expect(
        prisma.tenantSql('ten_aaaaaaaaaa', (sql) => sql.query(Prisma.sql`INSERT INTO sessions (id, tenant_id) VALUES ('ses_raw_forged', 'ten_bbbbbbbbbb')`)),
      ).rejects.toThrow(/row-level security/);
    });

    it('commit all of the work or, when it fails, none of it, and give the connection back either way', async () => {
      const onePool = new PrismaService({ url: db.appUrl, systemUrl: db.url }, { tenant: 1, system: 1 });
      try {
        const refused = await onePool
          .tenantSql('ten_aaaaaaaaaa', async (sql) => {
            await sql.query(Prisma.sql`INSERT INTO sessions (id, tenant_id) VALUES ('ses_raw_undone', 'ten_aaaaaaaaaa')`);
            await sql.query(Prisma.sql`INSERT INTO sessions (id, tenant_id) VALUES ('ses_raw_undone', 'ten_aaaaaaaaaa')`);
          })
          .catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(DatabaseError);
        expect(isUniqueViolation(refused)).toBe(true);
        await expect(onePool.tenantRead('ten_aaaaaaaaaa', Prisma.sql`SELECT * FROM no_such_table`)).rejects.toThrow(/no_such_table/);
        // Values a read cannot write in as literals are refused before anything is sent.
        await expect(onePool.tenantRead('ten_aaaaaaaaaa', Prisma.sql`SELECT ${'a\0b'}::text`)).rejects.toThrow(/without NUL/);
        await expect(onePool.tenantRead('ten_aaaaaaaaaa', Prisma.sql`SELECT ${[1, 2]}::int[]`)).rejects.toThrow(/tenantRead takes/);
        // The pool's one connection is usable again, outside any aborted transaction.
        await onePool.tenantSql('ten_aaaaaaaaaa', (sql) => sql.query(Prisma.sql`INSERT INTO sessions (id, tenant_id) VALUES ('ses_raw_kept', 'ten_aaaaaaaaaa')`));
        const ids = await sessionsOf('ten_aaaaaaaaaa');
        expect(ids).toContain('ses_raw_kept');
        expect(ids).not.toContain('ses_raw_undone');
      } finally {
        await onePool.close();
      }
    });

    it('write a read’s values in as literals that cannot break out of their quotes', async () => {
      const tricky = `it's a \\ test'; DROP TABLE sessions; --`;
      const [row] = await prisma.tenantRead<{ echoed: string; n: number; none: null; yes: boolean }>(
        'ten_aaaaaaaaaa',
        Prisma.sql`SELECT ${tricky}::text AS echoed, ${-42}::int AS n, ${null}::text AS none, ${true}::boolean AS yes`,
      );
      expect(row).toEqual({ echoed: tricky, n: -42, none: null, yes: true });
    });

    it('join an open tenant transaction, seeing its writes before they are committed', async () => {
      await prisma.tenant('ten_aaaaaaaaaa', async () => {
        await newSession('ten_aaaaaaaaaa', 'ses_raw_joined');
        const seen = Prisma.sql`SELECT id FROM sessions WHERE id = 'ses_raw_joined'`;
        expect(await prisma.tenantRead('ten_aaaaaaaaaa', seen)).toHaveLength(1);
        expect(await prisma.tenantSql('ten_aaaaaaaaaa', (sql) => sql.query(seen))).toHaveLength(1);
        expect(await sessionsOf('ten_aaaaaaaaaa')).not.toContain('ses_raw_joined');
      });
    });

    it('take an advisory lock before the work’s first statement', async () => {
      const lock = { classId: 0x52420009, name: 'ten_aaaaaaaaaa' };
      let release!: () => void;
      const holding = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const held = new Promise<void>((resolve) => (entered = resolve));
      const order: string[] = [];
      const first = prisma.tenantSql('ten_aaaaaaaaaa', async () => {
        entered();
        await holding;
        order.push('first done');
      }, { advisoryLock: lock });
      await held;
      const second = prisma.tenantSql('ten_aaaaaaaaaa', async () => {
        order.push('second in');
      }, { advisoryLock: lock });
      // The second waits on the lock in Postgres, not on anything in this process.
      const waiting = () => queryDatabase<{ n: number }>(db.url, `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      for (const deadline = Date.now() + 10_000; (await waiting())[0].n === 0; ) {
        if (Date.now() > deadline) throw new Error('the second transaction never waited for the lock');
      }
      expect(order).toEqual([]);
      release();
      await Promise.all([first, second]);
      expect(order).toEqual(['first done', 'second in']);
    });
  });
});
