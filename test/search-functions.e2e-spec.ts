import { createTestDatabase, queryDatabase, TestDatabase, TEST_ROLES } from '@app/testing';
import { Client } from 'pg';

const A = 'ten_searchfna';
const B = 'ten_searchfnb';

/** Each search function, called with arguments that match both tenants' rows. */
const CALLS: Array<{ name: string; sql: string }> = [
  { name: 'search_memories', sql: `SELECT id FROM search_memories('kumquat:*', 'kumquat:*', NULL, true, 50)` },
  { name: 'search_memories_fuzzy', sql: `SELECT id FROM search_memories_fuzzy('kumquat', '%kumquat%', NULL, true, '{}', 50)` },
  { name: 'search_messages', sql: `SELECT id FROM search_messages('kumquat:*', 'run_searching', '{}', 50)` },
  { name: 'search_messages_substring', sql: `SELECT id FROM search_messages_substring('%kumquat%', 'run_searching', '{}', 50)` },
  { name: 'search_rag_chunks', sql: `SELECT id::text FROM search_rag_chunks('ses_searchfn', 'kumquat:*', '{}', 50)` },
  { name: 'search_rag_chunks_substring', sql: `SELECT id::text FROM search_rag_chunks_substring('ses_searchfn', '%kumquat%', '{}', 50)` },
];

/**
 * The security-definer search functions (prisma/migrations/…_search_functions) read past
 * row-level security by design, so they must filter by the transaction's tenant themselves:
 * called directly as the services' role they give that tenant's rows only, nothing without a
 * tenant, and nobody else may call them at all.
 */
describe('search functions under row-level security', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Both tenants get the same word everywhere. The rag session id is shared on purpose: a
    // function trusting the session argument alone would then return B's chunks to A.
    await queryDatabase(db.url, `INSERT INTO tenants (id, name) VALUES ($1, $1), ($2, $2)`, [A, B]);
    for (const t of [A, B]) {
      await queryDatabase(db.url, `INSERT INTO sessions (id, tenant_id) VALUES ($1, $2)`, [`ses_${t}`, t]);
      await queryDatabase(db.url, `INSERT INTO memories (id, tenant_id, content) VALUES ($1, $2, 'the kumquat tree')`, [`mem_${t}`, t]);
      await queryDatabase(db.url, `INSERT INTO messages (id, tenant_id, session_id, run_id, role, content) VALUES ($1, $2, $3, 'run_earlier', 'user', 'a kumquat please')`, [`msg_${t}`, t, `ses_${t}`]);
      await queryDatabase(db.url, `INSERT INTO rag_documents (id, tenant_id, session_id, path, sha256, size_bytes, line_count, chunk_count) VALUES ($1, $2, $3, 'k.txt', 'x', 1, 1, 1)`, [
        `doc_${t}`,
        t,
        `ses_${t}`,
      ]);
    }
    // rag_chunks has no foreign key to sessions: rows of both tenants under one session id.
    for (const t of [A, B]) {
      await queryDatabase(
        db.url,
        `INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search)
         VALUES ($1, 'ses_searchfn', $2, 'k.txt', 1, 1, 'kumquat of ' || $1, to_tsvector('simple', 'kumquat'))`,
        [t, `doc_${t}`],
      );
    }
    // Filler without the word, so that an index on the searched column is worth using: the
    // planner picks the text-search index only where it narrows a tenant's many rows.
    await queryDatabase(db.url, `INSERT INTO memories (id, tenant_id, content) SELECT 'mem_filler' || g, $1, 'filler fact ' || g FROM generate_series(1, 3000) g`, [A]);
    await queryDatabase(
      db.url,
      `INSERT INTO messages (id, tenant_id, session_id, run_id, role, content) SELECT 'msg_filler' || g, $1, $2, 'run_earlier', 'user', 'filler message ' || g FROM generate_series(1, 3000) g`,
      [A, `ses_${A}`],
    );
    await queryDatabase(
      db.url,
      `INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search)
       SELECT $1, 'ses_searchfn', $2, 'f.txt', g, g, 'filler ' || g, to_tsvector('simple', 'filler ' || g) FROM generate_series(1, 3000) g`,
      [A, `doc_${A}`],
    );
    await queryDatabase(db.ownerUrl, 'ANALYZE memories, messages, rag_chunks');
  });
  afterAll(() => db?.drop());

  /** Runs `sql` as `url`'s role in a transaction whose app.tenant_id is `tenant` (none: unset). */
  async function as(url: string, tenant: string | null, sql: string): Promise<string[]> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query('BEGIN');
      if (tenant) await client.query(`SELECT set_config('app.tenant_id', $1, true)`, [tenant]);
      const { rows } = await client.query<{ id: string }>(sql);
      return rows.map((r) => r.id);
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    }
  }

  const tenantOf = async (ids: string[]): Promise<string[]> => {
    if (!ids.length) return [];
    const rows = await queryDatabase<{ tenant_id: string }>(
      db.url,
      `SELECT tenant_id FROM memories WHERE id = ANY($1) UNION ALL SELECT tenant_id FROM messages WHERE id = ANY($1)
       UNION ALL SELECT tenant_id FROM rag_chunks WHERE id::text = ANY($1)`,
      [ids],
    );
    return [...new Set(rows.map((r) => r.tenant_id))].sort();
  };

  it.each(CALLS)('$name gives the services’ role its tenant’s rows only, and nothing without a tenant', async ({ sql }) => {
    expect(await tenantOf(await as(db.appUrl, A, sql))).toEqual([A]);
    expect(await tenantOf(await as(db.appUrl, B, sql))).toEqual([B]);
    expect(await as(db.appUrl, null, sql)).toEqual([]);
    expect(await as(db.appUrl, 'ten_nosuchtenant', sql)).toEqual([]);
  });

  it.each(CALLS)('$name may be called by the services’ role only', async ({ sql }) => {
    await expect(as(db.url, A, sql)).rejects.toThrow(/permission denied for function/);
  });

  it('are security definers with a pinned search_path and JIT off that PUBLIC cannot execute', async () => {
    const rows = await queryDatabase<{ name: string; definer: boolean; config: string[] | null; public_can: boolean; app_can: boolean }>(
      db.ownerUrl,
      `SELECT p.proname AS name, p.prosecdef AS definer, p.proconfig AS config,
              has_function_privilege('public', p.oid, 'EXECUTE') AS public_can,
              has_function_privilege($1, p.oid, 'EXECUTE') AS app_can
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.prosecdef ORDER BY p.proname`,
      [TEST_ROLES.app.user],
    );
    // Every security definer in the schema is one of these, each locked down the same way.
    expect(rows.map((r) => r.name)).toEqual(CALLS.map((c) => c.name).sort());
    for (const r of rows) {
      expect({ name: r.name, config: r.config, public_can: r.public_can, app_can: r.app_can }).toEqual({
        name: r.name,
        // JIT compiling costs tens of milliseconds, more than these short queries themselves.
        config: ['search_path=pg_catalog, public, pg_temp', 'jit=off'],
        public_can: false,
        app_can: true,
      });
    }
  });

  // What the functions are for: as their owner, the text-search and trigram operators become
  // index conditions, instead of filters over every entry of the tenant as under the tenant
  // policy alone (there the plan reads the tenant's 3,000 filler rows).
  it.each([
    { table: 'memories', where: `tenant_id = '${A}' AND search @@ to_tsquery('english', 'kumquat:*')`, index: 'memories_search_idx', cond: /Index Cond: .*search @@/ },
    { table: 'memories', where: `tenant_id = '${A}' AND content ILIKE '%kumquat%'`, index: 'memories_content_trgm_idx', cond: /Index Cond: .*content ~~\* / },
    { table: 'messages', where: `tenant_id = '${A}' AND search @@ to_tsquery('english', 'kumquat:*')`, index: 'messages_search_idx', cond: /Index Cond: .*search @@/ },
    { table: 'rag_chunks', where: `session_id = 'ses_searchfn' AND search @@ to_tsquery('simple', 'kumquat:*')`, index: 'rag_chunks_search_idx', cond: /Index Cond: .*search @@/ },
  ])('lets the index answer $table WHERE $where for the functions’ owner', async ({ table, where, index, cond }) => {
    const client = new Client({ connectionString: db.ownerUrl });
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('app.tenant_id', $1, true)`, [A]);
      // These tables are small here, so which plan is cheapest depends on their statistics.
      // Leave the planner only the index the search is meant to use, inside this rolled-back
      // transaction, and price out sequential scans: it then puts every qual it may into the
      // index condition, and under the row-level-security barrier the search operator could
      // only ever be a Filter.
      const { rows: others } = await client.query<{ name: string; constraint_name: string | null }>(
        `SELECT i.indexrelid::regclass::text AS name, con.conname AS constraint_name
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
          WHERE i.indrelid = $1::regclass AND NOT i.indisprimary AND c.relname <> $2`,
        [table, index],
      );
      for (const { name, constraint_name } of others) {
        await client.query(constraint_name ? `ALTER TABLE ${table} DROP CONSTRAINT "${constraint_name}"` : `DROP INDEX ${name}`);
      }
      await client.query('SET LOCAL enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT * FROM ${table} WHERE ${where}`);
      expect(rows.map((r) => r['QUERY PLAN']).join('\n')).toMatch(cond);
    } finally {
      await client.query('ROLLBACK');
      await client.end();
    }
  });
});
