/**
 * Context budget benchmark: `./runbox bench context-memory`. Prints figures; asserts nothing.
 *
 * 20-turn runs whose every turn prints 1 MB in the sandbox (the report that found the
 * gateway growing from 170 to 652 MB after one), three in a row, each in a new session.
 * Measured twice in one run: with the default context budget, and with a budget so large
 * that every result is sent whole (the plain alternative, as before the budget). For each:
 * the gateway's resident memory (VmRSS) before the first run, at its peak and after each
 * run, the V8 heap in use after each run, and the size of the largest model request.
 *
 * Each case gets its own stack (fresh database, private NATS, gateway and executor as
 * processes of their own, one sandbox, a scripted model on loopback), removed at the end.
 */
import { ScriptedModelServer } from '@app/testing';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { BenchStack } from './support/bench-stack';

const ROOT = join(__dirname, '..');
const TURNS = 20;
const RESULT_CHARS = 1_000_000;
const WHOLE = 10_000_000;
/** Such runs one after another, each in a new session: memory that stays flat stops growing after the first. */
const RUNS = 3;

interface Figures {
  beforeMb: number;
  peakMb: number;
  /** RSS after each run. */
  afterMb: number[];
  /** V8 heap in use after each run (prom-client's figure, garbage not yet collected included). */
  heapAfterMb: number[];
  largestRequestMb: number;
  seconds: number;
}

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const load = loadavg().map((l) => l.toFixed(1)).join(' ');
  console.log(`runbox context budget benchmark (${TURNS} turns of ${RESULT_CHARS} characters; ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);
  const budgeted = await measure(image, undefined);
  print('default budget (200,000 chars)', budgeted);
  const whole = await measure(image, WHOLE);
  print('every result sent whole', whole);
  const growth = (f: Figures) => f.afterMb[f.afterMb.length - 1] - f.beforeMb;
  console.log(
    `\n  RSS growth after ${RUNS} runs: ${growth(budgeted).toFixed(0)} MB with the budget vs ${growth(whole).toFixed(0)} MB whole;` +
      ` peak ${budgeted.peakMb.toFixed(0)} vs ${whole.peakMb.toFixed(0)} MB (ratio ${(budgeted.peakMb / whole.peakMb).toFixed(2)})`,
  );
}

async function measure(image: string, budget: number | undefined): Promise<Figures> {
  const model = new ScriptedModelServer();
  const modelUrl = await model.start();
  const stack = new BenchStack({
    RUNBOX_SANDBOX_IMAGE: image,
    RUNBOX_MODEL_BASE_URL: modelUrl,
    RUNBOX_MODEL: 'scripted-1',
    ...(budget !== undefined ? { RUNBOX_CONTEXT_BUDGET_CHARS: String(budget) } : {}),
  });
  try {
    await stack.start();
    const tenant = await stack.createTenant('bench');
    // Warm up: the sandbox, the code paths, one small tool result.
    model.enqueue({ toolCalls: [{ name: 'terminal', arguments: { command: 'echo warm' } }] }, { content: 'warm' });
    await run(stack, tenant.apiKey, { input: 'warm up' });
    const beforeMb = rssMb(stack.gatewayPid);
    let peakMb = beforeMb;
    const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb(stack.gatewayPid))), 100);
    const afterMb: number[] = [];
    const heapAfterMb: number[] = [];
    const t0 = Date.now();
    for (let i = 0; i < RUNS; i++) {
      for (let turn = 0; turn < TURNS; turn++) {
        model.enqueue({ toolCalls: [{ name: 'terminal', arguments: { command: `head -c ${RESULT_CHARS} /dev/zero | tr '\\0' '${'abcdefghijklmnopqrst'[turn]}'` } }] });
      }
      model.enqueue({ content: 'done' });
      await run(stack, tenant.apiKey, { input: `print a lot (${i + 1})`, limits: { max_output_chars: RESULT_CHARS } });
      afterMb.push(rssMb(stack.gatewayPid));
      heapAfterMb.push(await heapUsedMb(stack));
    }
    clearInterval(sampler);
    const largestRequestMb = Math.max(...model.requests.map((r) => JSON.stringify(r.body).length)) / 1e6;
    return { beforeMb, peakMb: Math.max(peakMb, ...afterMb), afterMb, heapAfterMb, largestRequestMb, seconds: (Date.now() - t0) / 1000 / RUNS };
  } finally {
    await stack.stop();
    await model.stop();
  }
}

async function run(stack: BenchStack, key: string, body: Record<string, unknown>): Promise<void> {
  const res = await stack.request('POST', '/v1/runs', { key, body: { approval_mode: 'auto', ...body } });
  if (res.status !== 202) throw new Error(`POST /v1/runs answered ${res.status}: ${res.text}`);
  const deadline = Date.now() + 600_000;
  for (;;) {
    const got = (await stack.request('GET', `/v1/runs/${res.body.id}`, { key })).body;
    if (got?.status === 'completed') return;
    if (got?.status === 'failed' || got?.status === 'cancelled') throw new Error(`the run ended ${got.status}: ${got.error}`);
    if (Date.now() > deadline) throw new Error('the run did not end within 10 minutes');
    await new Promise((r) => setTimeout(r, 200));
  }
}

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

function print(label: string, f: Figures): void {
  const list = (values: number[]) => values.map((v) => v.toFixed(0)).join(', ');
  console.log(
    `  ${label}: gateway RSS before ${f.beforeMb.toFixed(0)} MB, after each run ${list(f.afterMb)} MB, peak ${f.peakMb.toFixed(0)} MB;` +
      ` V8 heap in use after each run ${list(f.heapAfterMb)} MB; largest model request ${f.largestRequestMb.toFixed(2)} MB; a run took ${f.seconds.toFixed(0)} s`,
  );
}

async function heapUsedMb(stack: BenchStack): Promise<number> {
  const text = (await stack.request('GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith('runbox_gateway_nodejs_heap_size_used_bytes'));
  return Number(line?.split(' ')[1] ?? 0) / 1e6;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
