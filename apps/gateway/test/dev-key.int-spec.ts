import { PrismaService } from '@app/persistence';
import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEV_TENANT, ensureDevKey } from '../src/cli/dev-key';

/** The development key `./runbox up` prints: one `default` tenant, a key that keeps working. */
describe('ensureDevKey', () => {
  let db: TestDatabase;
  let prisma: PrismaService;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    prisma = new PrismaService({ url: db.appUrl, systemUrl: db.url });
    dir = mkdtempSync(join(tmpdir(), 'runbox-dev-key-'));
  });
  afterAll(async () => {
    await prisma?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const tenants = () => queryDatabase<{ id: string }>(db.url, 'SELECT id FROM tenants WHERE name = $1', [DEV_TENANT]);
  const liveKeys = () => queryDatabase<{ id: string }>(db.url, 'SELECT id FROM api_keys WHERE revoked_at IS NULL');

  it('issues a key once, keeps it on the next start, and replaces a revoked or foreign one', async () => {
    const file = join(dir, 'dev-api-key');
    expect(await ensureDevKey(prisma, file)).toBe('issued');
    const first = readFileSync(file, 'utf8').trim();
    expect(first).toMatch(/^rbx_/);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    expect(await ensureDevKey(prisma, file)).toBe('kept');
    expect(readFileSync(file, 'utf8').trim()).toBe(first);
    expect(await tenants()).toHaveLength(1);

    // Revoked: a new key for the same tenant.
    await queryDatabase(db.url, 'UPDATE api_keys SET revoked_at = now()');
    expect(await ensureDevKey(prisma, file)).toBe('issued');
    const second = readFileSync(file, 'utf8').trim();
    expect(second).not.toBe(first);
    expect(await tenants()).toHaveLength(1);
    expect(await liveKeys()).toHaveLength(1);

    // A key this database never issued (a reset database, a copied file), world-readable.
    writeFileSync(file, 'rbx_not_a_key_of_this_database\n', { mode: 0o644 });
    expect(await ensureDevKey(prisma, file)).toBe('issued');
    expect(readFileSync(file, 'utf8').trim()).not.toBe('rbx_not_a_key_of_this_database');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await tenants()).toHaveLength(1);
  });
});
