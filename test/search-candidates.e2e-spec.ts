import { createTestDatabase, queryDatabase, TestDatabase } from '@app/testing';
import { Client } from 'pg';

const T = 'ten_candidates';
const SESSION = 'ses_candidates';
/** The search functions rank the newest this many matches (…_search_candidates_200 migration). */
const CANDIDATES = 200;
/** Inside the set, halfway down it. */
const MIDDLE = `${CANDIDATES / 2 + 0.5} seconds`;
const NEWER = CANDIDATES + 100;

/**
 * Each search ranks a bounded candidate set, the newest matches, so a word in many rows
 * costs the same as a word in a few hundred (docs/memory-and-retrieval.md, "Search at
 * scale"). Within the set the ranking is ts_rank as before; rows holding every word (memory)
 * and chunks whose path matches (rag) are candidates of their own. Each case has an older
 * row that would rank first if every match were ranked, and a best row inside the set.
 */
describe('search functions rank a bounded set of candidates', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    const sql = (text: string, params: unknown[] = []) => queryDatabase(db.url, text, params);
    await sql(`INSERT INTO tenants (id, name) VALUES ($1, $1)`, [T]);
    await sql(`INSERT INTO sessions (id, tenant_id) VALUES ($1, $2)`, [SESSION, T]);

    // messages: NEWER matches a second apart; the best of them in the middle; a better one a day older.
    await sql(
      `INSERT INTO messages (id, tenant_id, session_id, run_id, role, content, created_at)
       SELECT 'msg_newer' || g, $1, $2, 'run_earlier', 'user', 'kumquat filler ' || g, now() - g * interval '1 second'
         FROM generate_series(1, ${NEWER}) AS g`,
      [T, SESSION],
    );
    await sql(
      `INSERT INTO messages (id, tenant_id, session_id, run_id, role, content, created_at) VALUES
         ('msg_best', $1, $2, 'run_earlier', 'user', 'kumquat kumquat kumquat, said recently', now() - interval '${MIDDLE}'),
         ('msg_older', $1, $2, 'run_earlier', 'user', 'kumquat kumquat kumquat kumquat, said long ago', now() - interval '1 day')`,
      [T, SESSION],
    );

    // memories: likewise, plus an old fact holding both words of a two-word query.
    await sql(
      `INSERT INTO memories (id, tenant_id, content, created_at)
       SELECT 'mem_newer' || g, $1, 'apple fact ' || g, now() - g * interval '1 second' FROM generate_series(1, ${NEWER}) AS g`,
      [T],
    );
    await sql(
      `INSERT INTO memories (id, tenant_id, content, created_at) VALUES
         ('mem_best', $1, 'apple apple apple, noted recently', now() - interval '${MIDDLE}'),
         ('mem_older', $1, 'apple apple apple apple, noted long ago', now() - interval '1 day'),
         ('mem_both_words', $1, 'apple and banana, noted long ago', now() - interval '2 days')`,
      [T],
    );

    // rag_chunks: ids grow with each write. First a file named for the word and an older chunk
    // that would outrank everything, then NEWER chunks holding the word in their text.
    await sql(
      `INSERT INTO rag_documents (id, tenant_id, session_id, path, sha256, size_bytes, line_count, chunk_count)
       VALUES ('doc_candidates', $1, $2, 'src', 'x', 1, 1, 1)`,
      [T, SESSION],
    );
    const chunk = (path: string, content: string) =>
      `SELECT $1, $2, 'doc_candidates', ${path}, 1, 1, ${content},
              setweight(to_tsvector('simple', translate(${path}, '/_.', '   ')), 'A') || setweight(to_tsvector('simple', ${content}), 'B')`;
    const insertChunks = (select: string) =>
      sql(`INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search) ${select}`, [T, SESSION]);
    await insertChunks(chunk(`'src/kumquat.ts'`, `'export const fruit = 1'`));
    await insertChunks(chunk(`'src/older.ts'`, `'kumquat kumquat kumquat kumquat'`));
    await insertChunks(`${chunk(`'src/newer_' || g || '.ts'`, `'kumquat filler ' || g`)} FROM generate_series(1, ${NEWER}) AS g`);
    await insertChunks(chunk(`'src/best.ts'`, `'kumquat kumquat kumquat'`));
    await queryDatabase(db.ownerUrl, 'ANALYZE memories, messages, rag_chunks');
  });
  afterAll(() => db?.drop());

  /** Rows of a search function called as the services' role, in a transaction of tenant T. */
  async function search(sql: string): Promise<string[]> {
    const client = new Client({ connectionString: db.appUrl });
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('app.tenant_id', $1, true)`, [T]);
      const { rows } = await client.query<{ id: string }>(sql);
      return rows.map((r) => r.id);
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    }
  }

  it('session_search ranks the newest matches: the best of them first, an older better match not at all', async () => {
    const ids = await search(`SELECT id FROM search_messages('kumquat:*', 'run_searching', '{}', 1000)`);
    expect(ids[0]).toBe('msg_best');
    expect(ids).toHaveLength(CANDIDATES);
    expect(ids).not.toContain('msg_older');
  });

  it('memory ranks the newest matches, and facts holding every word are candidates of their own', async () => {
    const one = await search(`SELECT id FROM search_memories('apple:*', 'apple:*', NULL, true, 1000)`);
    expect(one[0]).toBe('mem_best');
    expect(one).toHaveLength(CANDIDATES);
    expect(one).not.toContain('mem_older');

    const both = await search(`SELECT id FROM search_memories('apple:* | banana:*', 'apple:* & banana:*', NULL, true, 3)`);
    expect(both).toEqual(['mem_both_words', 'mem_best', expect.stringMatching(/^mem_newer/)]);
  });

  it('rag_search ranks the newest matching chunks, and a file named for the word first however old', async () => {
    const ids = await search(
      `SELECT c.path AS id FROM search_rag_chunks('${SESSION}', 'kumquat:*', '{}', 1000) AS r JOIN rag_chunks c ON c.id = r.id`,
    );
    expect(ids.slice(0, 2)).toEqual(['src/kumquat.ts', 'src/best.ts']);
    expect(ids).toHaveLength(CANDIDATES + 1);
    expect(ids).not.toContain('src/older.ts');
  });
});
