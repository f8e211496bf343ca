/**
 * Runs with no tool call: `./runbox bench runs`. Prints figures; asserts nothing.
 *
 * Each run is POST /v1/runs (a new session) answered by a scripted model at once with a
 * final message. Sequentially (one at a time) and 32 at once, it prints:
 *
 *   runs/s              runs completed per second of wall time
 *   queued              created_at → started_at of the run (the run queue's pickup)
 *   overhead            created_at → completed_at less one bare model call (what Runbox
 *                       adds around the model: queue, claim, history, events, completion)
 *   POST → completed    what the client sees, from sending the POST to the run.completed event
 *   POST answered       the creation: quota check, the run's row, its queue message
 *
 * For each phase it also prints what a run costs in figures the machine's load does not
 * change (bench/support/run-costs.ts): Postgres statements and transactions, NATS
 * messages, and CPU time per process. On a shared machine they say more than wall time.
 *
 * The baseline is the bare model call: the same chat-completion request sent straight to
 * the scripted model from here, in the same run. Its own stack (fresh database, private
 * NATS, gateway and executor as processes of their own, the scripted model on loopback);
 * all of it is removed at the end.
 */
import { ScriptedModelServer } from '@app/testing';
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { readRunEvents } from '../test/support/sse';
import { BenchStack, BenchTenant } from './support/bench-stack';
import { RunCostMeter } from './support/run-costs';
import { percentile, timeIt } from './support/stats';

const ROOT = join(__dirname, '..');
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL_RUNS ?? 100);
const CONCURRENT = 32;
const CONCURRENT_ROUNDS = Number(process.env.BENCH_CONCURRENT_ROUNDS ?? 5);
const BARE_CALLS = 200;
const WARMUP = 10;

interface RunSample {
  createMs: number;
  queuedMs: number;
  createdToCompletedMs: number;
  clientMs: number;
}

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const model = new ScriptedModelServer();
  const modelUrl = await model.start();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image, RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' }, { countCosts: true });
  const costs = new RunCostMeter(stack);
  // Every request is answered at once with a final message, however many there are.
  const answer = () => ({ content: 'done' });
  model.route(() => true, ...Array.from({ length: 10 * (WARMUP + SEQUENTIAL + CONCURRENT * CONCURRENT_ROUNDS + BARE_CALLS) }, () => answer));
  try {
    await stack.start();
    // Room for 32 runs at once and for every run of the bench within the minute.
    const tenant = await stack.createTenant('bench', { max_concurrent_runs: 64, runs_per_minute: 100_000, max_sessions: 100_000 });
    const load = loadavg().map((l) => l.toFixed(1)).join(' ');
    console.log(`runbox runs bench (no tool calls, scripted model; ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);

    for (let i = 0; i < WARMUP; i++) await oneRun(stack, tenant, `warm-up ${i}`);
    const bare = await timeIt(BARE_CALLS, () => bareModelCall(modelUrl));
    const bareP50 = percentile(bare, 50);
    console.log(`bare model call (the baseline): p50 ${ms(bareP50)}, p99 ${ms(percentile(bare, 99))}\n`);

    const beforeSequential = await costs.snapshot();
    let started = performance.now();
    const sequential: RunSample[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) sequential.push(await oneRun(stack, tenant, `one ${i}`));
    const sequentialPerSecond = SEQUENTIAL / ((performance.now() - started) / 1000);
    const afterSequential = await costs.snapshot();
    report('1 at a time', sequential, sequentialPerSecond, bareP50);
    for (const line of RunCostMeter.report(beforeSequential, afterSequential, SEQUENTIAL)) console.log(line);
    console.log();

    started = performance.now();
    const concurrent: RunSample[] = [];
    for (let round = 0; round < CONCURRENT_ROUNDS; round++) {
      concurrent.push(...(await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => oneRun(stack, tenant, `many ${round} ${i}`)))));
    }
    const concurrentPerSecond = concurrent.length / ((performance.now() - started) / 1000);
    const afterConcurrent = await costs.snapshot();
    report(`${CONCURRENT} at once`, concurrent, concurrentPerSecond, bareP50);
    for (const line of RunCostMeter.report(afterSequential, afterConcurrent, concurrent.length)) console.log(line);
    console.log('\ntargets (1 at a time): overhead p50 ≤ 15 ms, queued p50 ≤ 3 ms');
  } finally {
    await stack.stop();
    await model.stop();
  }
}

/** One run from POST to its run.completed event, with the run's own timestamps. */
async function oneRun(stack: BenchStack, tenant: BenchTenant, input: string): Promise<RunSample> {
  const t0 = performance.now();
  const res = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input } });
  const createMs = performance.now() - t0;
  if (res.status !== 202) throw new Error(`POST /v1/runs answered ${res.status}: ${res.text}`);
  const id = res.body.id as string;
  const events = await readRunEvents(stack.url, tenant.apiKey, id, { timeoutMs: 60_000 });
  const clientMs = performance.now() - t0;
  const last = events[events.length - 1];
  if (last?.event !== 'run.completed') throw new Error(`run ${id} ended with ${last?.event}: ${JSON.stringify(last?.data)}`);
  const run = (await stack.request('GET', `/v1/runs/${id}`, { key: tenant.apiKey })).body;
  const created = Date.parse(run.created_at);
  return { createMs, queuedMs: Date.parse(run.started_at) - created, createdToCompletedMs: Date.parse(run.completed_at) - created, clientMs };
}

/** The request a run's first model call makes, sent straight to the scripted model. */
async function bareModelCall(modelUrl: string): Promise<void> {
  const res = await fetch(`${modelUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'scripted-1', messages: [{ role: 'user', content: 'bare' }] }),
  });
  if (res.status !== 200) throw new Error(`the scripted model answered ${res.status}`);
  await res.json();
}

function report(label: string, samples: RunSample[], perSecond: number, bareP50: number): void {
  const pick = (f: (s: RunSample) => number) => samples.map(f);
  const line = (name: string, values: number[]) => `  ${name.padEnd(18)} p50 ${ms(percentile(values, 50)).padStart(9)}  p99 ${ms(percentile(values, 99)).padStart(9)}`;
  const overhead = pick((s) => s.createdToCompletedMs - bareP50);
  console.log(`${label}: ${samples.length} runs, ${perSecond.toFixed(1)} runs/s`);
  console.log(line('queued', pick((s) => s.queuedMs)));
  console.log(line('overhead', overhead));
  console.log(line('created→completed', pick((s) => s.createdToCompletedMs)));
  console.log(line('POST → completed', pick((s) => s.clientMs)));
  console.log(line('POST answered', pick((s) => s.createMs)));
  console.log(`  overhead / bare model call (p50): ${(percentile(overhead, 50) / bareP50).toFixed(1)}\n`);
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`bench failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
