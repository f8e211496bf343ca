import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { PrismaPg } from '@prisma/adapter-pg';
import { WholeScriptPrismaPg } from '../src/whole-script-migrations';

/**
 * A migration script with semicolons where splitting at every `;` breaks it: a function body
 * in `$$` and one in a named dollar quote, a DO block, a string literal and both kinds of
 * comment. Each statement leaves a trace the test reads back.
 */
const SCRIPT = `
-- A comment; with a semicolon.
/* A block comment; with one too. */
CREATE TABLE migration_probe (note text NOT NULL);
CREATE FUNCTION migration_probe_add(n text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO migration_probe VALUES (n);
  INSERT INTO migration_probe VALUES (n || ' again');
END
$$;
CREATE FUNCTION migration_probe_count() RETURNS bigint LANGUAGE sql AS $body$
  SELECT count(*) FROM migration_probe; -- a semicolon inside a named dollar quote
$body$;
DO $$
BEGIN
  PERFORM migration_probe_add('from do; block');
END
$$;
INSERT INTO migration_probe VALUES ('a string; with a semicolon and ''quotes''');
`;

describe('WholeScriptPrismaPg (the migration runner’s adapter)', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(() => db?.drop());

  const notes = () => queryDatabase<{ note: string }>(db.ownerUrl, 'SELECT note FROM migration_probe ORDER BY note').then((rows) => rows.map((r) => r.note));

  it('runs function bodies, DO blocks, strings and comments holding semicolons', async () => {
    const adapter = await new WholeScriptPrismaPg({ connectionString: db.ownerUrl }).connect();
    try {
      await adapter.executeScript(SCRIPT);
    } finally {
      await adapter.dispose();
    }
    expect(await notes()).toEqual(['a string; with a semicolon and \'quotes\'', 'from do; block', 'from do; block again']);
    const [count] = await queryDatabase<{ n: string }>(db.ownerUrl, 'SELECT migration_probe_count()::text AS n');
    expect(count.n).toBe('3');
  });

  it('is needed: the stock adapter splits the same script at every semicolon and fails', async () => {
    const adapter = await new PrismaPg({ connectionString: db.ownerUrl }).connect();
    try {
      await expect(adapter.executeScript(SCRIPT)).rejects.toThrow();
    } finally {
      await adapter.dispose();
    }
  });

  it('applies a failing script not at all, and reports the database’s error', async () => {
    const adapter = await new WholeScriptPrismaPg({ connectionString: db.ownerUrl }).connect();
    try {
      await expect(adapter.executeScript(`${SCRIPT}\nSELECT no_such_function();`)).rejects.toMatchObject({
        name: 'DriverAdapterError',
        cause: expect.objectContaining({ originalCode: '42883', originalMessage: expect.stringContaining('no_such_function') }),
      });
    } finally {
      await adapter.dispose();
    }
    const [table] = await queryDatabase<{ exists: boolean }>(db.ownerUrl, `SELECT to_regclass('migration_probe') IS NOT NULL AS exists`);
    expect(table.exists).toBe(false);
  });
});
