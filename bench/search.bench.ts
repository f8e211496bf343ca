/**
 * Search at scale under forced row-level security: `./runbox bench search`. Prints figures;
 * asserts nothing.
 *
 * Loads one tenant with SEARCH_BENCH_ROWS rows (default 1,000,000) and nine others with
 * SEARCH_BENCH_OTHER_ROWS between them (default 9,000,000) into each of `memories`,
 * `messages` (session_search) and `rag_chunks` (rag_search; the tenant's chunks all in one
 * session, the worst case), as SQL with generate_series: short texts from a 4,000-word
 * vocabulary drawn with a heavy head (a few words in many rows, most in few), so full text
 * has real work to do. Then, for each search and for a two-word query, a rare word, a common
 * word and a word that matches nothing, three ways on the same data:
 *
 * - `after`: the code path the API uses (MemoryService, HistoryRepository, RagSearchService
 *   as runbox_app), which calls the security-definer search functions;
 * - `before`: the same code calling the search functions as they were before they ranked a
 *   bounded candidate set (prisma/migrations/20261201210000_search_functions, loaded into a
 *   schema of their own, with the expression index they used);
 * - `plain`: the queries as they were before any search function, as the table owner with
 *   row-level security not forced (what the indexes give without any policy).
 *
 * Loading: the three tables are UNLOGGED (a bench database: nothing to recover; reads are
 * the same), filled with their secondary indexes dropped, which are then built at the end
 * with a large maintenance_work_mem, SEARCH_BENCH_LOAD_CONNECTIONS (2) steps at a time.
 * The loaded database is named by a hash of the data parameters and the migrations; with
 * SEARCH_BENCH_KEEP=1 it is kept, and a later run with the same key measures it without
 * loading (SEARCH_BENCH_DB=name measures a kept database whatever the key). Otherwise it is
 * dropped at the end. Load time and sizes are printed. SEARCH_BENCH_WAYS (default
 * after,before,plain) picks the ways timed; without `before` its index is not built.
 */
import { ADMIN_URL, TEST_ROLES, urlWithRole, withAdmin } from '@app/testing';
import { PrismaService, Tx } from '@app/persistence';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { HistoryRepository } from '../apps/gateway/src/history/history.repository';
import { MemoryRepository } from '../apps/gateway/src/memory/memory.repository';
import { MemoryService } from '../apps/gateway/src/memory/memory.service';
import { RagRepository } from '../apps/gateway/src/rag/rag.repository';
import { RagSearchService } from '../apps/gateway/src/rag/rag-search.service';
import { parseTextQuery, TextQuery } from '../apps/gateway/src/search/text-query';
import { percentile } from './support/stats';

const TENANT_ROWS = Number(process.env.SEARCH_BENCH_ROWS ?? 1_000_000);
const OTHER_ROWS = Number(process.env.SEARCH_BENCH_OTHER_ROWS ?? 9_000_000);
const OTHER_TENANTS = 9;
/** Samples per figure, unless SAMPLE_BUDGET_MS runs out first (the slow "before" queries). */
const SAMPLES = Number(process.env.SEARCH_BENCH_SAMPLES ?? 30);
const SAMPLE_BUDGET_MS = 20_000;
const LIMIT = 10;
const POOL_TEXTS = Number(process.env.SEARCH_BENCH_POOL_TEXTS ?? 100_000);
const LOAD_CONNECTIONS = Number(process.env.SEARCH_BENCH_LOAD_CONNECTIONS ?? 2);
/**
 * A kept database to measure as it is, by name: its key stops matching once a migration is
 * added, and reloading takes a quarter of an hour or more. Never loaded into, never dropped.
 */
const NAMED = process.env.SEARCH_BENCH_DB;
const KEEP = process.env.SEARCH_BENCH_KEEP === '1' || NAMED !== undefined;
/** Which ways to time (comma-separated); re-measuring a kept database without `before` skips its index build. */
const WAYS = (process.env.SEARCH_BENCH_WAYS ?? 'after,before,plain').split(',').filter((w): w is Way => ['after', 'before', 'plain'].includes(w));
const BENCH_TENANT = 'ten_searchbench';
const BENCH_SESSION = 'ses_searchbench';
/** session_search leaves out the searching run's own messages: a run of none of them here. */
const SEARCHING_RUN = 'run_searchbench';
const VOCABULARY = vocabulary(4000);
const TABLES = ['tenants', 'sessions', 'memories', 'messages', 'rag_documents', 'rag_chunks'];
const SEARCHED = ['memories', 'messages', 'rag_chunks'];
/** The search functions as they were before candidate sets; `before` calls these. */
const BEFORE_MIGRATION = '20261201210000_search_functions';
/** Bumped when the loading SQL below changes what is loaded. */
const DATA_VERSION = 3;

/** Words by frequency rank: 0 is the most common. */
const QUERIES: Array<{ name: string; text: string }> = [
  { name: 'two words', text: `${VOCABULARY[400]} ${VOCABULARY[900]}` },
  { name: 'rare word', text: VOCABULARY[3000] },
  { name: 'common word', text: VOCABULARY[30] },
  { name: 'matches nothing', text: 'quuxzyzzy' },
];

type Search = 'memory' | 'session_search' | 'rag_search';
type Way = 'after' | 'before' | 'plain';
/** A figure's first call (untimed in p50/p99: the pages as earlier figures left them), then the timed calls. */
interface Sampled {
  first: number;
  times: number[];
  /** The call failed (a transaction past its timeout, say): the figure is this message, not a time. */
  failed?: string;
}
type Figures = Record<Search, Record<string, Partial<Record<Way, Sampled>>>>;

interface BenchDatabase {
  name: string;
  /** As runbox_system. */
  url: string;
  /** As runbox_app, the services' tenant role. */
  appUrl: string;
  /** As the owner. */
  ownerUrl: string;
}

async function main(): Promise<void> {
  const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
  console.log(
    `runbox search benchmark: ${TENANT_ROWS.toLocaleString('en')} rows in the tenant, ${OTHER_ROWS.toLocaleString('en')} in ${OTHER_TENANTS} others, ` +
      `per table (${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load()})\n`,
  );
  const { db, loaded } = await benchDatabase();
  const owner = new Client({ connectionString: db.ownerUrl });
  await owner.connect();
  // A database is kept only complete: loading that failed half way leaves nothing behind.
  let keep = KEEP;
  let complete = loaded;
  try {
    if (!loaded) await loadData(db);
    else console.log(`measuring the kept database ${db.name} (SEARCH_BENCH_KEEP=1 loaded it before)\n`);
    complete = true;
    if (WAYS.includes('before')) await installBefore(owner);
    console.log(`measuring (load average ${load()})`);
    const figures = await measure(db, owner);
    print(figures);
    console.log(`\nload average at the end: ${load()}`);
  } catch (err) {
    keep &&= complete;
    throw err;
  } finally {
    await owner.end();
    if (keep) console.log(`kept ${db.name}; drop it with DROP DATABASE ${db.name}`);
    else await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${db.name} WITH (FORCE)`));
  }
}

// --- data -------------------------------------------------------------------------------

const TEMPLATE = process.env.RUNBOX_TEST_TEMPLATE_DB ?? 'runbox_bench_template';

/**
 * The database named by the data parameters and the migration set: reused when a run with
 * SEARCH_BENCH_KEEP=1 left it behind, else cloned from the migrated bench template.
 */
async function benchDatabase(): Promise<{ db: BenchDatabase; loaded: boolean }> {
  const migrations = readdirSync(join(__dirname, '../prisma/migrations')).filter((m) => /^\d/.test(m)).sort();
  // Names are enough: an applied migration is never edited, a change is a new one.
  const key = createHash('sha256').update(JSON.stringify({ TENANT_ROWS, OTHER_ROWS, OTHER_TENANTS, POOL_TEXTS, DATA_VERSION, migrations })).digest('hex').slice(0, 12);
  const name = NAMED ?? `runbox_searchbench_${key}`;
  if (!/^runbox_searchbench_[0-9a-f]{12}$/.test(name)) throw new Error(`SEARCH_BENCH_DB: ${name} is not a search bench database name`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const db = { name, ownerUrl: url.toString(), url: urlWithRole(url.toString(), TEST_ROLES.system), appUrl: urlWithRole(url.toString(), TEST_ROLES.app) };
  const exists = await withAdmin(async (c) => (await c.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [name])).rowCount === 1);
  if (exists) {
    // A kept database is complete: it is marked only after loading finished.
    const done = new Client({ connectionString: db.ownerUrl });
    await done.connect();
    const marked = await done.query(`SELECT 1 FROM pg_class WHERE relname = 'search_bench_loaded'`).finally(() => done.end());
    if (marked.rowCount === 1) return { db, loaded: true };
    if (NAMED) throw new Error(`SEARCH_BENCH_DB: ${name} was not loaded completely`);
    await withAdmin((c) => c.query(`DROP DATABASE ${name} WITH (FORCE)`));
  }
  if (NAMED) throw new Error(`SEARCH_BENCH_DB: no database ${name}`);
  await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`));
  return { db, loaded: false };
}

/** Runs steps on `LOAD_CONNECTIONS` owner connections, each chain's steps in order. */
async function onConnections(db: BenchDatabase, chains: Array<Array<{ label: string; sql: string; params?: unknown[] }>>): Promise<void> {
  const queue = [...chains];
  const worker = async () => {
    const c = new Client({ connectionString: db.ownerUrl });
    await c.connect();
    try {
      await c.query(`SET maintenance_work_mem = '1GB'`);
      await c.query(`SET work_mem = '1GB'`);
      await c.query(`SET max_parallel_maintenance_workers = 2`);
      for (let chain = queue.shift(); chain; chain = queue.shift()) {
        for (const step of chain) {
          const t = Date.now();
          await c.query(step.sql, step.params ?? []);
          console.log(`  ${step.label}: ${((Date.now() - t) / 1000).toFixed(1)} s`);
        }
      }
    } finally {
      await c.end();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, LOAD_CONNECTIONS) }, worker));
}

async function loadData(db: BenchDatabase): Promise<void> {
  const started = Date.now();
  const owner = new Client({ connectionString: db.ownerUrl });
  await owner.connect();
  console.log(`loading into ${db.name}`);
  // The owner loads with row-level security not forced (it then bypasses the policies), and
  // without the secondary indexes, which are built once at the end: far faster than
  // inserting 10 M rows into GIN indexes. Both are put back before anything is measured.
  for (const t of TABLES) await owner.query(`ALTER TABLE ${t} NO FORCE ROW LEVEL SECURITY`);
  for (const t of SEARCHED) await owner.query(`ALTER TABLE ${t} SET UNLOGGED`);
  const { rows: indexes } = await owner.query<{ name: string; table: string; definition: string }>(
    `SELECT indexname AS name, tablename AS table, indexdef AS definition FROM pg_indexes
      WHERE schemaname = 'public' AND tablename = ANY($1) AND indexname NOT LIKE '%pkey'`,
    [SEARCHED],
  );
  for (const i of indexes) await owner.query(`DROP INDEX ${i.name}`);

  const others = Array.from({ length: OTHER_TENANTS }, (_, i) => `ten_searchother${i}`);
  await owner.query(`INSERT INTO tenants (id, name) SELECT t, t FROM unnest($1::text[]) AS t`, [[BENCH_TENANT, ...others]]);
  // Row g belongs to the bench tenant when g <= TENANT_ROWS, else to one of the others.
  const tenantOf = `CASE WHEN g <= ${TENANT_ROWS} THEN '${BENCH_TENANT}' ELSE 'ten_searchother' || (g % ${OTHER_TENANTS}) END`;
  const total = TENANT_ROWS + OTHER_ROWS;
  // n words drawn from the vocabulary, the first ranks far more often (rank = N·u³).
  // (The draw sits in a subquery of its own: inside string_agg the outer `v` would make the
  // aggregate the outer query's.)
  const words = (n: string) =>
    `(SELECT string_agg(w, ' ') FROM (SELECT v[1 + floor(${VOCABULARY.length} * power(random(), 3))::int] AS w FROM generate_series(1, ${n})) AS drawn)`;
  const vocab = [VOCABULARY];

  const tenantSessions = Math.ceil(TENANT_ROWS / 1000);
  // Sessions: the bench tenant's messages in sessions of 1,000, the others' likewise; one
  // more session holds the tenant's retrieval chunks.
  await owner.query(
    `INSERT INTO sessions (id, tenant_id) SELECT 'ses_sb' || s, CASE WHEN s <= ${tenantSessions} THEN '${BENCH_TENANT}' ELSE 'ten_searchother' || (s % ${OTHER_TENANTS}) END
       FROM generate_series(1, ${tenantSessions + Math.ceil(OTHER_ROWS / 1000)}) AS s
     UNION ALL SELECT '${BENCH_SESSION}', '${BENCH_TENANT}'
     UNION ALL SELECT 'ses_sbrag' || t, 'ten_searchother' || t FROM generate_series(0, ${OTHER_TENANTS - 1}) AS t`,
  );
  await owner.end();
  // Texts come from pools of POOL_TEXTS drawn texts each (short for memories, longer for
  // messages, longest for chunks), row g taking text g·7919 mod POOL_TEXTS: drawing every
  // row's words anew is what made loading slow. Memories add their row number, so no two
  // facts of a tenant are equal (a unique index holds them apart). Rows are written in the
  // order the service writes them (time, chunk id), so that the table is laid out as it
  // would be: joined to a pool without ORDER BY they came out scattered, and reading the
  // newest rows of a tenant read a page per row. The pools are unlogged
  // tables, not temporary ones, so every loading connection sees them.
  const pool = (name: string, n: string) => ({
    label: `pool ${name} (${POOL_TEXTS.toLocaleString('en')} texts)`,
    sql: `CREATE UNLOGGED TABLE ${name} AS SELECT i, ${words(n)} AS content FROM (SELECT $1::text[] AS v) AS vocab, generate_series(0, ${POOL_TEXTS - 1}) AS i`,
    params: vocab,
  });
  const pick = (table: string, row: string) => `JOIN ${table} AS p ON p.i = (${row}::bigint * 7919) % ${POOL_TEXTS}`;
  const docs = Math.ceil(total / 20);
  await onConnections(db, [
    [
      pool('bench_long_texts', '30 + i % 31'),
      { label: 'pool bench_long_texts tsvectors', sql: `ALTER TABLE bench_long_texts ADD COLUMN search tsvector` },
      { label: 'pool bench_long_texts tsvectors', sql: `UPDATE bench_long_texts SET search = setweight(to_tsvector('simple', content), 'B')` },
      // Retrieval: documents of 20 chunks each under a path of words.
      {
        label: `rag_documents (${docs.toLocaleString('en')})`,
        sql: `INSERT INTO rag_documents (id, tenant_id, session_id, path, sha256, size_bytes, line_count, chunk_count)
         SELECT 'doc_sb' || d, t.tenant, CASE WHEN t.tenant = '${BENCH_TENANT}' THEN '${BENCH_SESSION}' ELSE 'ses_sbrag' || right(t.tenant, 1) END,
                'src/' || v[1 + d % 200] || '/' || v[1 + (d * 7) % ${VOCABULARY.length}] || '_' || d || '.ts', 'x', 1, 1, 20
           FROM (SELECT $1::text[] AS v) AS vocab, generate_series(0, ${docs - 1}) AS d,
                LATERAL (SELECT CASE WHEN d * 20 + 1 <= ${TENANT_ROWS} THEN '${BENCH_TENANT}' ELSE 'ten_searchother' || (d % ${OTHER_TENANTS}) END AS tenant) AS t`,
        params: vocab,
      },
      {
        label: `rag_chunks (${total.toLocaleString('en')})`,
        sql: `INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search)
         SELECT d.tenant_id, d.session_id, d.id, d.path, 1 + c.n * 50, 60 + c.n * 50, p.content,
                setweight(to_tsvector('simple', translate(d.path, '/_.', '   ')), 'A') || p.search
           FROM rag_documents d CROSS JOIN generate_series(0, 19) AS c(n)
                ${pick('bench_long_texts', '(substr(d.id, 7)::bigint * 20 + c.n)')}
          WHERE d.id LIKE 'doc_sb%'
          ORDER BY substr(d.id, 7)::bigint, c.n`,
      },
    ],
    [
      pool('bench_medium_texts', '8 + i % 30'),
      {
        label: `messages (${total.toLocaleString('en')})`,
        sql: `INSERT INTO messages (id, tenant_id, session_id, run_id, role, content, created_at)
         SELECT 'msg_sb' || g, CASE WHEN s.n <= ${tenantSessions} THEN '${BENCH_TENANT}' ELSE 'ten_searchother' || (s.n % ${OTHER_TENANTS}) END, 'ses_sb' || s.n, 'run_sb' || s.n,
                (ARRAY['user', 'assistant', 'tool', 'assistant'])[1 + g % 4], p.content, now() - g * interval '1 second'
           FROM generate_series(1, ${total}) AS g
                CROSS JOIN LATERAL (SELECT CASE WHEN g <= ${TENANT_ROWS} THEN 1 + (g - 1) / 1000 ELSE ${tenantSessions} + 1 + (g - ${TENANT_ROWS} - 1) / 1000 END AS n) AS s
                ${pick('bench_medium_texts', 'g')}
          ORDER BY g`,
      },
    ],
    [
      pool('bench_short_texts', '6 + i % 14'),
      {
        label: `memories (${total.toLocaleString('en')})`,
        sql: `INSERT INTO memories (id, tenant_id, content, created_at)
         SELECT 'mem_sb' || g, ${tenantOf}, p.content || ' (' || g || ')', now() - g * interval '1 second'
           FROM generate_series(1, ${total}) AS g ${pick('bench_short_texts', 'g')}
          ORDER BY g`,
      },
    ],
  ]);
  // Largest builds first, so the last one to start is a short one.
  const weight = (i: { table: string; definition: string }) => (i.table === 'rag_chunks' ? 3 : i.table === 'messages' ? 2 : 1) * (/gin/i.test(i.definition) ? 10 : 1);
  await onConnections(
    db,
    [...indexes].sort((a, b) => weight(b) - weight(a)).map((i) => [{ label: `index ${i.name}`, sql: i.definition }]),
  );
  await onConnections(
    db,
    [...SEARCHED, 'rag_documents', 'sessions'].map((t) => [{ label: `vacuum analyze ${t}`, sql: `VACUUM ANALYZE ${t}` }]),
  );
  const done = new Client({ connectionString: db.ownerUrl });
  await done.connect();
  try {
    await done.query(`DROP TABLE bench_short_texts, bench_medium_texts, bench_long_texts`);
    for (const t of TABLES) await done.query(`ALTER TABLE ${t} FORCE ROW LEVEL SECURITY`);
    await done.query(`CREATE TABLE search_bench_loaded ()`);
    const { rows: sizes } = await done.query<{ table: string; size: string }>(
      `SELECT relname AS table, pg_size_pretty(pg_total_relation_size(oid)) || ' (table ' || pg_size_pretty(pg_table_size(oid)) || ')' AS size
         FROM pg_class WHERE relname = ANY($1) ORDER BY relname`,
      [SEARCHED],
    );
    const { rows: all } = await done.query<{ size: string }>(`SELECT pg_size_pretty(pg_database_size(current_database())) AS size`);
    console.log(
      `  loaded in ${((Date.now() - started) / 1000).toFixed(0)} s; with indexes: ${sizes.map((s) => `${s.table} ${s.size}`).join(', ')}; database ${all[0].size}\n`,
    );
  } finally {
    await done.end();
  }
}

/**
 * The search functions as they were before candidate sets, in a schema of their own that
 * `before` puts first on its search path, with the expression index the old
 * search_messages used (partial to the bench tenant: its searches read only the tenant's
 * entries either way, and building it for every tenant would double the wait).
 */
async function installBefore(owner: Client): Promise<void> {
  const sql = readFileSync(join(__dirname, '../prisma/migrations', BEFORE_MIGRATION, 'migration.sql'), 'utf8');
  const functions = [...sql.matchAll(/CREATE FUNCTION (search_memories|search_messages|search_rag_chunks)\(.*?\n\$\$;/gs)].map((m) => m[0]);
  if (functions.length !== 3) throw new Error(`expected 3 search functions in ${BEFORE_MIGRATION}, found ${functions.length}`);
  const t = Date.now();
  await owner.query(`DROP SCHEMA IF EXISTS search_before CASCADE`);
  await owner.query(`CREATE SCHEMA search_before`);
  for (const f of functions) await owner.query(f.replace('CREATE FUNCTION ', 'CREATE FUNCTION search_before.'));
  await owner.query(`GRANT USAGE ON SCHEMA search_before TO ${TEST_ROLES.app.user}`);
  await owner.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA search_before TO ${TEST_ROLES.app.user}`);
  await owner.query(`SET maintenance_work_mem = '1GB'`);
  await owner.query(
    `CREATE INDEX IF NOT EXISTS messages_content_search_before_idx ON messages USING GIN (tenant_id, to_tsvector('english'::regconfig, COALESCE(content, '')))
      WHERE tenant_id = '${BENCH_TENANT}'`,
  );
  await owner.query(`ANALYZE messages`);
  console.log(`the functions before candidate sets, with their index: ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
}

// --- measuring --------------------------------------------------------------------------

async function measure(db: BenchDatabase, owner: Client): Promise<Figures> {
  const prisma = await PrismaService.forService({ url: db.appUrl, systemUrl: db.url });
  // The same role and code, with the old functions first on the search path.
  const beforeUrl = new URL(db.appUrl);
  beforeUrl.searchParams.set('options', '-c search_path=search_before,public');
  const beforePrisma = await PrismaService.forService({ url: beforeUrl.toString(), systemUrl: db.url });
  const ownerPrisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: db.ownerUrl }) });
  // The plain alternative is the comparison, not the product: at ten million rows it ranks
  // every match for seconds, past the 5 s an interactive transaction gets by default.
  const PLAIN_TX = { timeout: 120_000 };
  const services = (p: PrismaService) => ({
    memories: new MemoryService(new MemoryRepository(p)),
    history: new HistoryRepository(p),
    rag: new RagSearchService(new RagRepository(p)),
  });
  const after = services(prisma);
  const before = services(beforePrisma);
  const figures: Figures = { memory: {}, session_search: {}, rag_search: {} };
  const ways: Record<Search, Record<Way, (text: string) => Promise<unknown>>> = {
    memory: {
      after: (text) => after.memories.find(BENCH_TENANT, { kind: 'all' }, text, LIMIT),
      before: (text) => before.memories.find(BENCH_TENANT, { kind: 'all' }, text, LIMIT),
      plain: (text) => ownerPrisma.$transaction((tx) => legacyMemory(tx, parseTextQuery(text)), PLAIN_TX),
    },
    session_search: {
      after: (text) => after.history.search(BENCH_TENANT, parseTextQuery(text), LIMIT, SEARCHING_RUN),
      before: (text) => before.history.search(BENCH_TENANT, parseTextQuery(text), LIMIT, SEARCHING_RUN),
      plain: (text) => ownerPrisma.$transaction((tx) => legacyHistory(tx, parseTextQuery(text)), PLAIN_TX),
    },
    rag_search: {
      after: (text) => after.rag.search(BENCH_TENANT, BENCH_SESSION, text, LIMIT),
      before: (text) => before.rag.search(BENCH_TENANT, BENCH_SESSION, text, LIMIT),
      plain: (text) => ownerPrisma.$transaction((tx) => legacyRag(tx, parseTextQuery(text, { splitIdentifiers: true })), PLAIN_TX),
    },
  };
  try {
    for (const way of WAYS) {
      // The plain alternative: the owner, row-level security not forced, so no policy applies.
      if (way === 'plain') for (const t of TABLES) await owner.query(`ALTER TABLE ${t} NO FORCE ROW LEVEL SECURITY`);
      for (const search of Object.keys(ways) as Search[]) {
        for (const q of QUERIES) {
          const run = ways[search][way];
          const sampled = await sample(() => run(q.text)).catch((err: unknown) => ({ first: NaN, times: [], failed: (err instanceof Error ? err.message.split('\n')[0] : String(err)) || 'failed' }));
          (figures[search][q.name] ??= {})[way] = sampled;
          // As it goes: a figure's failure does not lose the others, and a long run shows where it is.
          console.log(`  ${search} ${q.name} ${way}: ${sampled.failed !== undefined ? `failed: ${sampled.failed}` : `first ${sampled.first.toFixed(1)} ms, p50 ${percentile(sampled.times, 50).toFixed(1)} ms (${sampled.times.length})`}`);
        }
      }
      if (way === 'plain') for (const t of TABLES) await owner.query(`ALTER TABLE ${t} FORCE ROW LEVEL SECURITY`);
    }
  } finally {
    await prisma.close();
    await beforePrisma.close();
    await ownerPrisma.$disconnect();
  }
  return figures;
}

/**
 * Times `work` SAMPLES times after one call that warms plans and pages, or fewer when the
 * calls take long: at least three, and no more once SAMPLE_BUDGET_MS is spent. A call that
 * alone takes a quarter of the budget (a scan of a million rows) is timed once, cold.
 */
async function sample(work: () => Promise<unknown>): Promise<Sampled> {
  const time = async () => {
    const t = process.hrtime.bigint();
    await work();
    return Number(process.hrtime.bigint() - t) / 1e6;
  };
  const first = await time();
  if (first > SAMPLE_BUDGET_MS / 4) return { first, times: [first] };
  const times: number[] = [];
  const deadline = Date.now() + SAMPLE_BUDGET_MS;
  while (times.length < SAMPLES && (times.length < 3 || Date.now() < deadline)) times.push(await time());
  return { first, times };
}

function print(figures: Figures): void {
  const ms = (s: Sampled | undefined, p: number) => (s && !s.failed ? percentile(s.times, p).toFixed(1) : '-');
  const p50 = (s: Sampled | undefined) => (s && !s.failed ? percentile(s.times, 50) : NaN);
  console.log('p50 / p99 in ms (samples), after the first call of each figure; ratios of p50');
  console.log(
    `${'search'.padEnd(15)}${'query'.padEnd(17)}${'after: 1st call'.padEnd(17)}${'after'.padEnd(24)}${'before'.padEnd(24)}${'plain (owner, no RLS)'.padEnd(24)}${'before/after'.padEnd(14)}after/plain`,
  );
  for (const [search, byQuery] of Object.entries(figures)) {
    for (const [query, f] of Object.entries(byQuery)) {
      const cell = (s: Sampled | undefined) => (s?.failed ? 'failed' : `${ms(s, 50)} / ${ms(s, 99)} (${s?.times.length ?? 0})`);
      console.log(
        `${search.padEnd(15)}${query.padEnd(17)}${(f.after?.first.toFixed(1) ?? '-').padEnd(17)}${cell(f.after).padEnd(24)}${cell(f.before).padEnd(24)}${cell(f.plain).padEnd(24)}` +
          `${(p50(f.before) / p50(f.after)).toFixed(1).padEnd(14)}${(p50(f.after) / p50(f.plain)).toFixed(2)}`,
      );
    }
  }
}

// --- the queries as they were before the search functions -------------------------------

async function legacyMemory(tx: Tx, q: TextQuery): Promise<unknown[]> {
  const hits: Array<{ id: string }> = [];
  if (q.anyTerms) {
    hits.push(
      ...(await tx.$queryRawUnsafe<Array<{ id: string }>>(
        `SELECT id, scope, content, run_id, created_at, ts_rank(search, to_tsquery('english', $2)) AS rank
           FROM memories
          WHERE tenant_id = $1 AND TRUE AND search @@ to_tsquery('english', $2)
          ORDER BY (search @@ to_tsquery('english', $3)) DESC, rank DESC, created_at DESC
          LIMIT $4`,
        BENCH_TENANT,
        q.anyTerms,
        q.allTerms,
        LIMIT,
      )),
    );
  }
  if (hits.length < LIMIT && q.text) {
    hits.push(
      ...(await tx.$queryRawUnsafe<Array<{ id: string }>>(
        `SELECT id, scope, content, run_id, created_at,
                GREATEST(word_similarity($2, content), CASE WHEN content ILIKE $3 THEN 1 ELSE 0 END) AS similarity
           FROM memories
          WHERE tenant_id = $1 AND TRUE AND NOT (id = ANY($4::text[])) AND (content ILIKE $3 OR $2 <% content)
          ORDER BY similarity DESC, created_at DESC
          LIMIT $5`,
        BENCH_TENANT,
        q.text,
        q.likePattern,
        hits.map((h) => h.id),
        LIMIT - hits.length,
      )),
    );
  }
  return hits;
}

async function legacyHistory(tx: Tx, q: TextQuery): Promise<unknown[]> {
  const ranked = (match: string, limit: number, exclude: string[]) =>
    tx.$queryRawUnsafe<Array<{ id: string }>>(
      `WITH ranked AS (
         SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, m.content,
                ts_rank(to_tsvector('english', COALESCE(m.content, '')), q) AS score
           FROM messages m
           JOIN sessions s ON s.id = m.session_id AND s.tenant_id = $1 AND s.status = 'active',
                to_tsquery('english', $2) AS q
          WHERE m.tenant_id = $1 AND to_tsvector('english', COALESCE(m.content, '')) @@ q
            AND m.run_id IS DISTINCT FROM $6 AND NOT (m.id = ANY($4::text[]))
          ORDER BY score DESC, m.created_at DESC
          LIMIT $3)
       SELECT r.id, ts_headline('english', left(r.content, 20000), to_tsquery('english', $5), 'StartSel=**, StopSel=**, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "') AS snippet
         FROM ranked r ORDER BY r.score DESC, r.created_at DESC`,
      BENCH_TENANT,
      match,
      limit,
      exclude,
      q.anyTerms,
      SEARCHING_RUN,
    );
  const hits: Array<{ id: string }> = [];
  if (q.anyTerms && q.allTerms) {
    hits.push(...(await ranked(q.allTerms, LIMIT, [])));
    if (hits.length < LIMIT && q.terms.length > 1) hits.push(...(await ranked(q.anyTerms, LIMIT - hits.length, hits.map((h) => h.id))));
  }
  if (hits.length < LIMIT && q.text) {
    hits.push(
      ...(await tx.$queryRawUnsafe<Array<{ id: string }>>(
        `SELECT m.id, left(m.content, 20000) AS content
           FROM messages m
           JOIN sessions s ON s.id = m.session_id AND s.tenant_id = $1 AND s.status = 'active'
          WHERE m.tenant_id = $1 AND m.role IN ('user', 'assistant') AND m.content ILIKE $2
            AND m.run_id IS DISTINCT FROM $5 AND NOT (m.id = ANY($3::text[]))
          ORDER BY m.created_at DESC LIMIT $4`,
        BENCH_TENANT,
        q.likePattern,
        hits.map((h) => h.id),
        LIMIT - hits.length,
        SEARCHING_RUN,
      )),
    );
  }
  return hits;
}

async function legacyRag(tx: Tx, q: TextQuery): Promise<unknown[]> {
  const wanted = LIMIT * 2;
  const ranked = (tsquery: string, limit: number, exclude: string[]) =>
    tx.$queryRawUnsafe<Array<{ id: bigint }>>(
      `SELECT c.id, c.path, c.start_line, c.end_line, c.content, ts_rank(c.search, q) AS score
         FROM rag_chunks c, to_tsquery('simple', $3) AS q
        WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.search @@ q AND NOT (c.id::text = ANY($4::text[]))
        ORDER BY score DESC, c.path, c.start_line
        LIMIT $5`,
      BENCH_TENANT,
      BENCH_SESSION,
      tsquery,
      exclude,
      limit,
    );
  const hits: Array<{ id: bigint }> = [];
  if (q.anyTerms && q.allTerms) {
    hits.push(...(await ranked(q.allTerms, wanted, [])));
    if (hits.length < wanted && q.terms.length > 1) hits.push(...(await ranked(q.anyTerms, wanted - hits.length, hits.map((h) => String(h.id)))));
  }
  if (hits.length < wanted && q.text) {
    hits.push(
      ...(await tx.$queryRawUnsafe<Array<{ id: bigint }>>(
        `SELECT c.id, c.path, c.start_line, c.end_line, c.content, 1::float AS score
           FROM rag_chunks c
          WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.content ILIKE $3 AND NOT (c.id::text = ANY($4::text[]))
          LIMIT $5`,
        BENCH_TENANT,
        BENCH_SESSION,
        q.likePattern,
        hits.map((h) => String(h.id)),
        wanted - hits.length,
      )),
    );
  }
  return hits;
}

/** `n` distinct pronounceable words (two to four syllables), the same on every run. */
function vocabulary(n: number): string[] {
  const onsets = ['b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'br', 'st', 'tr', 'pl'];
  const vowels = ['a', 'e', 'i', 'o', 'u', 'ai', 'ou'];
  const words = new Set<string>();
  // mulberry32: a small seeded generator in 32-bit integer arithmetic.
  let seed = 20261201;
  const next = (k: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % k;
  };
  while (words.size < n) {
    const syllables = 2 + next(3);
    let w = '';
    for (let i = 0; i < syllables; i++) w += onsets[next(onsets.length)] + vowels[next(vowels.length)];
    words.add(w + ['', 'n', 'r', 'l', 'x'][next(5)]);
  }
  return [...words];
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
