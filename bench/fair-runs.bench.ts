/**
 * Fair run workers benchmark: `./runbox bench fair-runs`. Prints figures; asserts nothing.
 *
 * Tenant A posts more slow runs than the gateway has run workers (34 with the default 32,
 * as in the report that found one tenant starving the others); its model calls are held
 * until the end. While A saturates the workers, tenant B posts trivial runs one after
 * another, and the bench prints how long each took to start (created_at → started_at) and
 * to complete, as p50/p99, next to the same runs of B on an idle gateway in the same run.
 * A run of B that has not started after 30 s is reported as such.
 *
 * Its own stack (fresh database, private NATS, gateway and executor as processes of their
 * own, a scripted model on loopback); all of it is removed at the end.
 */
import { ScriptedModelServer } from '@app/testing';
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { BenchStack, BenchTenant } from './support/bench-stack';

const ROOT = join(__dirname, '..');
const WORKERS = Number(process.env.RUNBOX_RUN_WORKERS ?? 32);
const SLOW_RUNS = WORKERS + 2;
const SAMPLES = 20;
const START_TIMEOUT_MS = 30_000;

interface Sample {
  startMs: number;
  completeMs: number;
}

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const model = new ScriptedModelServer();
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  model.route((r) => ScriptedModelServer.firstUserMessage(r).startsWith('slow'), ...Array.from({ length: SLOW_RUNS }, () => () => released.then(() => ({ content: 'slow done' }))));
  model.route((r) => ScriptedModelServer.firstUserMessage(r).startsWith('quick'), ...Array.from({ length: 2 * SAMPLES + 2 }, () => ({ content: 'quick done' })));
  const modelUrl = await model.start();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image, RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_RUN_WORKERS: String(WORKERS) });
  try {
    await stack.start();
    const a = await stack.createTenant('tenant-a', { max_concurrent_runs: 1000, runs_per_minute: 1000 });
    const b = await stack.createTenant('tenant-b');
    const load = loadavg().map((l) => l.toFixed(1)).join(' ');
    console.log(`runbox fair run workers benchmark (${WORKERS} run workers, ${SLOW_RUNS} slow runs of A; ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);

    await quickRun(stack, b, 'quick warm-up');
    const alone = await samples(stack, b, 'alone');

    for (let i = 0; i < SLOW_RUNS; i++) await start(stack, a, `slow ${i}`);
    const slowStarted = () => model.requests.filter((r) => ScriptedModelServer.firstUserMessage(r).startsWith('slow')).length;
    await until(() => slowStarted() >= WORKERS - Math.max(1, Math.floor(WORKERS / 8)) || slowStarted() >= WORKERS, 60_000);
    console.log(`A holds ${slowStarted()} of ${WORKERS} workers; ${SLOW_RUNS - slowStarted()} of its runs wait\n`);
    const contended = await samples(stack, b, 'while A saturates');

    report('B alone', alone);
    report('B while A saturates', contended);
    if (alone.length > 0 && contended.length > 0) {
      const ratio = (f: (s: Sample[]) => number) => (f(contended) / f(alone)).toFixed(2);
      console.log(`  saturated/alone: start p50 ${ratio((s) => p(s.map((x) => x.startMs), 0.5))}x, complete p50 ${ratio((s) => p(s.map((x) => x.completeMs), 0.5))}x`);
    }
    const worstStart = contended.length < SAMPLES ? Infinity : p(contended.map((s) => s.startMs), 0.99);
    console.log(`  target: B starts within 1 s while A saturates (p99) → ${worstStart < 1000 ? 'met' : 'MISSED'}`);
  } finally {
    release();
    await stack.stop();
    await model.stop();
  }
}

async function samples(stack: BenchStack, tenant: BenchTenant, label: string): Promise<Sample[]> {
  const out: Sample[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const sample = await quickRun(stack, tenant, `quick ${label} ${i}`);
    if (!sample) {
      console.log(`  B's run ${label} had not started after ${START_TIMEOUT_MS / 1000} s; stopping the samples`);
      break;
    }
    out.push(sample);
  }
  return out;
}

async function start(stack: BenchStack, tenant: BenchTenant, input: string): Promise<string> {
  const res = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input } });
  if (res.status !== 202) throw new Error(`POST /v1/runs answered ${res.status}: ${res.text}`);
  return res.body.id as string;
}

/** One run of B, from POST to completed; undefined when it did not start in time. */
async function quickRun(stack: BenchStack, tenant: BenchTenant, input: string): Promise<Sample | undefined> {
  const t0 = performance.now();
  const id = await start(stack, tenant, input);
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const run = (await stack.request('GET', `/v1/runs/${id}`, { key: tenant.apiKey })).body;
    if (run?.status === 'completed') {
      return { startMs: Date.parse(run.started_at) - Date.parse(run.created_at), completeMs: performance.now() - t0 };
    }
    if (run?.status === 'failed') throw new Error(`B's run failed: ${run.error}`);
    if (Date.now() > deadline) {
      await stack.request('POST', `/v1/runs/${id}/cancel`, { key: tenant.apiKey });
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

function report(label: string, s: Sample[]): void {
  if (s.length === 0) return console.log(`  ${label}: no run started`);
  const starts = s.map((x) => x.startMs);
  const completes = s.map((x) => x.completeMs);
  console.log(
    `  ${label}: start p50 ${p(starts, 0.5).toFixed(0)} ms p99 ${p(starts, 0.99).toFixed(0)} ms | POST → completed p50 ${p(completes, 0.5).toFixed(0)} ms p99 ${p(completes, 0.99).toFixed(0)} ms (n=${s.length})`,
  );
}

function p(values: number[], q: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the slow runs to take the workers');
    await new Promise((r) => setTimeout(r, 50));
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
