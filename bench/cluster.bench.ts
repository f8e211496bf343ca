/**
 * Scale-out figures, printed, never asserted (run with `npm run bench:cluster`), on a
 * cluster stack of real processes (three NATS nodes, a private PostgreSQL, two gateways and
 * an executor; test/support/cluster-stack.ts):
 *
 *   gateway-loss takeover   a run's gateway is SIGKILLed mid tool call: time until another
 *                           gateway resumes the run (run.resumed); beside it, the same with
 *                           SIGTERM, where the run is handed over at once
 *   NATS-node loss          `terminal true` through the HTTP API, one call after another:
 *                           p50/p99 with no fault, then in the same run with the NATS node
 *                           the executor is connected to SIGKILLed a few calls in (and any
 *                           call that failed)
 *
 * RUNBOX_BENCH_LEASE_SECONDS sets the run lease (default 4; the deployment default is 30,
 * and a crash takeover takes about one lease).
 */
import { ScriptedModelServer } from '@app/testing';
import type { RecordedRequest, ScriptedReply } from '@app/testing';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ClusterStack } from '../test/support/cluster-stack';
import { ServiceProcess } from '../test/support/service-process';
import { percentile } from './support/stats';

const LEASE_SECONDS = Number(process.env.RUNBOX_BENCH_LEASE_SECONDS ?? 4);
const TAKEOVERS = 5;
const CALLS_PER_PHASE = 300;
const FAULT_AFTER_CALLS = 30;

async function main(): Promise<void> {
  process.stdout.write(`cluster bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}, lease ${LEASE_SECONDS} s\n`);
  const stack = new ClusterStack({
    gateways: 2,
    env: { RUNBOX_RUN_LEASE_SECONDS: String(LEASE_SECONDS), RUNBOX_RUN_SWEEP_SECONDS: '1', RUNBOX_EXECUTOR_GRACE_MS: '2000' },
  });
  await stack.start();
  try {
    const key = await stack.createTenant();
    const kill = await takeovers(stack, key, 'SIGKILL');
    const term = await takeovers(stack, key, 'SIGTERM');
    const nats = await natsNodeLoss(stack, key);
    process.stdout.write('\n');
    row('gateway SIGKILL → run resumed elsewhere', kill);
    row('gateway SIGTERM → run resumed elsewhere', term);
    process.stdout.write(`  takeover after a crash / after an orderly stop (p50): ${(percentile(kill, 50) / percentile(term, 50)).toFixed(1)}×\n`);
    row('terminal `true`, no fault', nats.baseline);
    row('terminal `true`, a NATS node killed', nats.faulted);
    process.stdout.write(`  p99 with the node loss / without: ${(percentile(nats.faulted, 99) / percentile(nats.baseline, 99)).toFixed(2)}×; calls that failed: ${nats.failures}\n`);
  } finally {
    await stack.stop();
  }
}

/** Time from stopping the gateway that runs a run (mid tool call) to the run's run.resumed on another. */
async function takeovers(stack: ClusterStack, key: string, signal: NodeJS.Signals): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < TAKEOVERS; i++) {
    const input = `takeover-${signal}-${i}`;
    const script = (request: RecordedRequest): ScriptedReply =>
      request.body.messages.some((m) => m.role === 'tool') ? { content: 'done' } : { toolCalls: [{ id: 'call_sleep', name: 'terminal', arguments: { command: 'sleep 3' } }] };
    stack.model.route(ScriptedModelServer.sentBy(input), script, script, script);
    const run = await post(stack.gateways[0], key, '/v1/runs', { input });
    const victim = await until(async () => {
      const rows = await stack.postgres.query<{ n: number }>(`SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1 AND status = 'running'`, [run.id]);
      return rows[0].n > 0 ? stack.gatewayRunning(run.id) : undefined;
    });
    const stopped = performance.now();
    await victim.kill(signal);
    await until(async () => {
      const rows = await stack.postgres.query<{ n: number }>(`SELECT count(*)::int AS n FROM run_events WHERE run_id = $1 AND type = 'run.resumed'`, [run.id]);
      return rows[0].n > 0 ? true : undefined;
    });
    times.push(performance.now() - stopped);
    await victim.start();
    await until(async () => ((await stack.postgres.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [run.id]))[0].status === 'completed' ? true : undefined));
  }
  return times;
}

/** Direct terminal calls one after another, without a fault and then with a NATS node killed a few calls in. */
async function natsNodeLoss(stack: ClusterStack, key: string): Promise<{ baseline: number[]; faulted: number[]; failures: number }> {
  const gateway = stack.gateways[0];
  const session = await post(gateway, key, '/v1/sessions', {});
  const failed: string[] = [];
  const call = async (): Promise<number | undefined> => {
    const started = performance.now();
    const res = await fetch(`${gateway.url}/v1/sessions/${session.id}/tools/terminal`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ arguments: { command: 'true', timeout_seconds: 5 } }),
    });
    const body = await res.text();
    if (res.status === 200) return performance.now() - started;
    failed.push(`${res.status} after ${(performance.now() - started).toFixed(0)} ms: ${body.slice(0, 200)}`);
    return undefined;
  };
  for (let i = 0; i < 20; i++) await call();
  const baseline: number[] = [];
  for (let i = 0; i < CALLS_PER_PHASE; i++) {
    const ms = await call();
    if (ms !== undefined) baseline.push(ms);
  }
  const faulted: number[] = [];
  let failures = 0;
  let killed = 0;
  for (let i = 0; i < CALLS_PER_PHASE; i++) {
    if (i === FAULT_AFTER_CALLS) {
      // The node the executor is connected to: every call's request and reply pass through it.
      killed = await stack.nats.nodeServing('runbox-executor-');
      await stack.nats.kill(killed);
    }
    const ms = await call();
    if (ms === undefined) failures++;
    else faulted.push(ms);
  }
  await stack.nats.restart(killed);
  for (const line of failed) process.stdout.write(`  failed call: ${line}\n`);
  return { baseline, faulted, failures };
}

async function post(gateway: ServiceProcess, key: string, path: string, body: unknown): Promise<{ id: string }> {
  const res = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status >= 300) throw new Error(`POST ${path} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { id: string };
}

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function row(name: string, samples: number[]): void {
  process.stdout.write(`${name.padEnd(42)} n=${String(samples.length).padStart(3)}  p50 ${percentile(samples, 50).toFixed(1).padStart(8)} ms  p99 ${percentile(samples, 99).toFixed(1).padStart(8)} ms\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
