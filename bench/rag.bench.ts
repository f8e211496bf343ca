/**
 * rag_index and rag_search on a generated folder of 2,000 files, through the real stack:
 * HTTP → gateway → NATS → executor → sandbox agent (reads) and Postgres (index, search).
 * Compared in the same run with the plain alternative, a case-insensitive substring scan
 * (ILIKE) over the same chunks, with and without the trigram index that can serve it.
 *
 *   npm run bench:rag                 (Postgres, NATS and Docker must be up: ./runbox up or test)
 *   RAG_BENCH_FILES=500 npm run bench:rag
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { PrismaService } from '@app/persistence';
import { Client } from 'pg';
import { RagRepository } from '../apps/gateway/src/rag/rag.repository';
import { RagSearchService } from '../apps/gateway/src/rag/rag-search.service';

const FILES = Number(process.env.RAG_BENCH_FILES ?? 2_000);
const ADMIN_URL = process.env.RUNBOX_TEST_ADMIN_DATABASE_URL ?? 'postgresql://runbox:runbox@127.0.0.1:5432/postgres';
const ROOT = `${__dirname}/..`;

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? sh('deploy/sandbox/build.sh').trim().split('\n').pop()!;
  const template = `runbox_bench_template_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE ${template}`);
  try {
    const migrated = spawnSync(process.execPath, ['scripts/prisma.js', 'migrate', 'deploy'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: dbUrl(template), MIGRATION_DATABASE_URL: dbUrl(template) },
      encoding: 'utf8',
    });
    if (migrated.status !== 0) throw new Error(`migrations failed:\n${migrated.stdout}${migrated.stderr}`);
    // Imported only now: the test database helper reads the template name when it loads.
    process.env.RUNBOX_TEST_TEMPLATE_DB = template;
    process.env.RUNBOX_SANDBOX_IMAGE = image;
    const { TestStack } = await import('../test/support/test-stack');
    const stack = await new TestStack().start();
    try {
      await run(stack);
    } finally {
      await stack.stop();
    }
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
  }
}

async function run(stack: import('../test/support/test-stack').TestStack): Promise<void> {
  const { apiKey } = await stack.createTenant('bench');
  const newSession = async () => (await stack.request('POST', '/v1/sessions', { key: apiKey, body: {} })).body.id as string;
  const tool = async (session: string, name: string, args: Record<string, unknown>) => {
    const res = await stack.request('POST', `/v1/sessions/${session}/tools/${name}`, { key: apiKey, body: { arguments: args } });
    if (res.status !== 200 || res.body.is_error) throw new Error(`${name} failed: ${res.status} ${res.text.slice(0, 500)}`);
    return res.body as { output: string; metadata: Record<string, any> };
  };

  const session = await newSession();
  const generated = await tool(session, 'terminal', { command: generator(FILES), timeout_seconds: 300 });
  console.log(`generated: ${generated.output.trim()}`);

  const cold = await timed(() => tool(session, 'rag_index', { path: 'corpus' }));
  const m = cold.value.metadata;
  line('rag_index, cold', `${fmt(cold.ms)} ms wall for ${m.files_indexed} files, ${m.chunks} chunks (${rate(m.files_indexed, cold.ms)} files/s)`);
  line('  Postgres write time', `${fmt(m.write_ms)} ms, summed over batches written two at a time beside the reads`);
  const warm = await timed(() => tool(session, 'rag_index', { path: 'corpus' }));
  line('rag_index, nothing changed', `${fmt(warm.ms)} ms (${warm.value.metadata.files_unchanged} unchanged files re-read and hashed)`);
  await tool(session, 'terminal', { command: 'for f in corpus/svc-00*/mod-000*.ts; do echo "// touched" >> "$f"; done' });
  const incremental = await timed(() => tool(session, 'rag_index', { path: 'corpus' }));
  line('rag_index, after editing a few', `${fmt(incremental.ms)} ms (${incremental.value.metadata.files_indexed} rewritten)`);

  const queries = queriesFor(FILES);
  const searchAll = () => latencies(queries.map((q) => () => tool(session, 'rag_search', { query: q.text, limit: 5 })));
  // Right after a large first write, Postgres has no statistics for the new GIN entries yet
  // and may plan substring searches as scans; autovacuum's VACUUM ANALYZE (within a minute
  // or so of such a write) fixes that. Measured both ways.
  const fresh = await searchAll();
  line(`rag_search, right after indexing`, summary(fresh.ms));
  const vacuum = new Client({ connectionString: stack.db.url });
  await vacuum.connect();
  await vacuum.query('VACUUM ANALYZE rag_chunks');
  await vacuum.end();
  const search = await searchAll();
  line(`rag_search over HTTP (${queries.length} queries)`, summary(search.ms));
  for (const kind of KINDS) {
    const ms = search.ms.filter((_, i) => queries[i].kind === kind);
    line(`  ${kind} (${ms.length})`, summary(ms));
  }
  const planted = queries.map((q, i) => ({ q, r: search.values[i] })).filter(({ q }) => q.expect);
  const first = planted.filter(({ q, r }) => r.metadata.results[0]?.path === q.expect).length;
  line('rag_search ranks the planted file 1st', `${first} of ${planted.length} queries`);

  // The same ranking without HTTP, auth and formatting: what the database work costs.
  const prisma = new PrismaService(stack.db.url);
  const ranking = new RagSearchService(new RagRepository(prisma));
  const tenantId = await tenantOf(stack, session);
  const direct = await latencies(queries.map((q) => () => ranking.search(tenantId, session, q.text, 5)));
  line('rag_search ranking alone (no HTTP)', summary(direct.ms));
  await prisma.close();

  const db = new Client({ connectionString: stack.db.url });
  await db.connect();
  try {
    const ilike = await latencies(queries.map((q) => () => db.query(ILIKE_SQL, [session, `%${q.text}%`])));
    const ilikeFound = queries.filter((q, i) => q.expect && ilike.values[i].rows.some((r) => r.path === q.expect)).length;
    line('plain ILIKE, trigram index', summary(ilike.ms));
    line('plain ILIKE finds the planted file', `${ilikeFound} of ${planted.length} queries (unranked)`);
    await db.query('SET enable_bitmapscan = off');
    await db.query('SET enable_indexscan = off');
    const scan = await latencies(queries.slice(0, 60).map((q) => () => db.query(ILIKE_SQL, [session, `%${q.text}%`])));
    line('plain ILIKE, sequential scan', `${summary(scan.ms)} (first 60 queries)`);
    await db.query('RESET ALL');

    const sizes = await db.query(
      `SELECT relname, pg_size_pretty(pg_relation_size(oid)) AS size FROM pg_class
       WHERE relname IN ('rag_chunks', 'rag_chunks_search_idx', 'rag_chunks_content_trgm_idx') ORDER BY relname`,
    );
    line('sizes', sizes.rows.map((r) => `${r.relname} ${r.size}`).join(', '));

    // What the trigram index costs at indexing time: the same folder into a new session without it.
    // Only the tables' owner may drop their index; the queries above ran as the system role.
    const owner = new Client({ connectionString: stack.db.ownerUrl });
    await owner.connect();
    await owner.query('DROP INDEX rag_chunks_content_trgm_idx').finally(() => owner.end());
    const other = await newSession();
    await tool(other, 'terminal', { command: generator(FILES), timeout_seconds: 300 });
    const noTrgm = await timed(() => tool(other, 'rag_index', { path: 'corpus' }));
    line('rag_index, cold, no trigram index', `${fmt(noTrgm.ms)} ms wall, Postgres write time ${fmt(noTrgm.value.metadata.write_ms)} ms`);
  } finally {
    await db.end();
  }
}

/** A Python program that writes `n` files: TypeScript modules and Markdown notes, ~4 KB each. */
function generator(n: number): string {
  return `python3 - <<'EOF'
import os, random
random.seed(42)
common = "request response cache worker queue token schema index shard replica cluster service client retry timeout config".split()
prose = "the a of to and in for with on that this is be are as by it from at".split()
total = 0
for i in range(${n}):
    svc = "corpus/svc-%03d" % (i // 20)
    os.makedirs(svc, exist_ok=True)
    rare = "zq%04dx" % i
    if i % 2 == 0:
        path = "%s/mod-%04d.ts" % (svc, i)
        lines = ["import { Client } from './client';", ""]
        for f in range(12):
            name = random.choice(common) + random.choice(common).title() + str(f)
            lines += ["export function %s(input: %s) {" % (name, random.choice(common).title()),
                      "  const %s = input.%s ?? %d;" % (random.choice(common), random.choice(common), f),
                      "  if (!input) throw new Error('%s %s failed');" % (random.choice(common), random.choice(common)),
                      "  return %s(input);" % random.choice(common), "}", ""]
        lines.insert(30, "export const handle%s = (order) => applyDiscount%s(order.total);" % (rare.title(), rare.title()))
    else:
        path = "%s/note-%04d.md" % (svc, i)
        lines = ["# Note %d" % i, ""]
        for p in range(12):
            lines += [" ".join(random.choice(common + prose * 2) for _ in range(14)) + "." for _ in range(5)] + [""]
        lines.insert(25, "The %s escalation policy pages the on-call engineer after nine minutes." % rare)
    body = "\\n".join(lines) + "\\n"
    total += len(body)
    open(path, "w").write(body)
print("%d files, %.1f MB" % (${n}, total / 1e6))
EOF`;
}

const KINDS = ['identifier', 'words out of order', 'common words', 'no match'] as const;
type Query = { kind: (typeof KINDS)[number]; text: string; expect?: string };

function queriesFor(n: number): Query[] {
  const rng = mulberry32(7);
  const pick = () => Math.floor(rng() * n);
  const file = (i: number) => `corpus/svc-${String(Math.floor(i / 20)).padStart(3, '0')}/${i % 2 === 0 ? 'mod' : 'note'}-${String(i).padStart(4, '0')}.${i % 2 === 0 ? 'ts' : 'md'}`;
  const out: Query[] = [];
  for (let k = 0; k < 100; k++) {
    const i = pick() & ~1;
    out.push({ kind: 'identifier', text: `applyDiscountZq${String(i).padStart(4, '0')}x`, expect: file(i) });
  }
  for (let k = 0; k < 100; k++) {
    const i = pick() | 1;
    out.push({ kind: 'words out of order', text: `escalation policy for zq${String(i).padStart(4, '0')}x`, expect: file(i) });
  }
  for (const text of ['cache worker', 'retry timeout', 'replica cluster', 'schema index', 'token service']) {
    for (let k = 0; k < 10; k++) out.push({ kind: 'common words', text });
  }
  for (let k = 0; k < 50; k++) out.push({ kind: 'no match', text: `nothing-here-${k}` });
  return out;
}

const ILIKE_SQL = `SELECT id, path FROM rag_chunks WHERE session_id = $1 AND content ILIKE $2 LIMIT 10`;

async function tenantOf(stack: import('../test/support/test-stack').TestStack, session: string): Promise<string> {
  const db = new Client({ connectionString: stack.db.url });
  await db.connect();
  try {
    return (await db.query('SELECT tenant_id FROM sessions WHERE id = $1', [session])).rows[0].tenant_id as string;
  } finally {
    await db.end();
  }
}

async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint();
  const value = await work();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

async function latencies<T>(work: Array<() => Promise<T>>): Promise<{ ms: number[]; values: T[] }> {
  const ms: number[] = [];
  const values: T[] = [];
  for (const w of work) {
    const t = await timed(w);
    ms.push(t.ms);
    values.push(t.value);
  }
  return { ms, values };
}

function summary(ms: number[]): string {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  return `p50 ${fmt(at(50))} ms, p99 ${fmt(at(99))} ms, max ${fmt(sorted[sorted.length - 1])} ms`;
}

function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));
const rate = (n: number, ms: number) => ((n * 1000) / ms).toFixed(0);
const line = (what: string, figure: string) => console.log(`${what.padEnd(36)} ${figure}`);

function sh(command: string): string {
  const res = spawnSync('bash', ['-c', command], { cwd: ROOT, encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`${command} failed: ${res.stderr}`);
  return res.stdout;
}

function dbUrl(name: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function admin(sql: string): Promise<void> {
  const client = new Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
