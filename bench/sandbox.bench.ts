/**
 * Sandbox latency figures, printed, never asserted (run with `npm run bench:sandbox`).
 *
 *   cold ready        a new session's first `terminal true` through the HTTP API with no
 *                     warm pool: container create + start + attach + the command
 *   warm ready        the same with a warm pool (waited full before each sample)
 *   terminal          `terminal true` through the HTTP API on a ready sandbox
 *   plain exec        the same command as one Docker API exec (create, start, read to the
 *                     end, inspect the exit code) on the same container
 *
 * It starts its own gateway and executors on a private database and NATS server (the
 * test stack) and removes every container, volume, database and process it made.
 */
import { eventually } from '@app/testing';
import Docker from 'dockerode';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { SandboxPool } from '../apps/executor/src/sandbox/sandbox-pool';
import { TenantCredentials, TestStack } from '../test/support/test-stack';
import { percentile } from './support/stats';

const COLD_SAMPLES = 15;
const WARM_SAMPLES = 15;
const ROUND_TRIPS = 300;
const EXECS = 100;
const WARM_POOL_SIZE = 2;

const docker = new Docker();

interface Figure {
  name: string;
  samples: number[];
  target?: string;
}

async function main(): Promise<void> {
  process.stdout.write(`sandbox bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}, image ${process.env.RUNBOX_SANDBOX_IMAGE ?? 'runbox-sandbox:latest'}\n`);
  const figures: Figure[] = [];
  const cold = await new TestStack({ env: { RUNBOX_WARM_POOL_SIZE: '0' } }).start();
  try {
    const tenant = await cold.createTenant();
    figures.push({ name: 'cold session ready', samples: await sessionReady(cold, tenant, COLD_SAMPLES), target: 'p50 ≤ 400 ms' });
    const { terminal, exec } = await roundTrips(cold, tenant);
    figures.push({ name: 'terminal `true` via HTTP API', samples: terminal, target: 'p50 ≤ 15 ms' });
    figures.push({ name: 'plain Docker API exec `true`', samples: exec });
  } finally {
    await cold.stop();
  }
  const warm = await new TestStack({ env: { RUNBOX_WARM_POOL_SIZE: String(WARM_POOL_SIZE) } }).start();
  try {
    const tenant = await warm.createTenant();
    const pool = warm.executorProvider(SandboxPool);
    const beforeEach = () => eventually('a full warm pool', async () => pool.ready === WARM_POOL_SIZE, 120_000, 20).then(() => undefined);
    figures.splice(1, 0, { name: 'warm-pool session ready', samples: await sessionReady(warm, tenant, WARM_SAMPLES, beforeEach), target: 'p50 ≤ 50 ms' });
  } finally {
    await warm.stop();
  }
  report(figures);
}

/** Time from a new session's first tool call to its successful result. */
async function sessionReady(stack: TestStack, tenant: TenantCredentials, samples: number, beforeEach?: () => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < samples + 1; i++) {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    await beforeEach?.();
    const started = performance.now();
    await terminal(stack, tenant, session.body.id);
    const elapsed = performance.now() - started;
    if (i > 0) times.push(elapsed); // the first one warms caches and connections
    await stack.request('DELETE', `/v1/sessions/${session.body.id}`, { key: tenant.apiKey });
  }
  return times;
}

async function roundTrips(stack: TestStack, tenant: TenantCredentials): Promise<{ terminal: number[]; exec: number[] }> {
  const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
  const id = session.body.id as string;
  for (let i = 0; i < 20; i++) await terminal(stack, tenant, id);
  const terminalTimes: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const started = performance.now();
    await terminal(stack, tenant, id);
    terminalTimes.push(performance.now() - started);
  }
  const [container] = await docker.listContainers({ filters: { label: [`runbox.session=${id}`] } });
  const target = docker.getContainer(container.Id);
  for (let i = 0; i < 5; i++) await plainExec(target);
  const execTimes: number[] = [];
  for (let i = 0; i < EXECS; i++) {
    const started = performance.now();
    await plainExec(target);
    execTimes.push(performance.now() - started);
  }
  return { terminal: terminalTimes, exec: execTimes };
}

async function terminal(stack: TestStack, tenant: TenantCredentials, sessionId: string): Promise<void> {
  const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
  if (res.status !== 200 || res.body.is_error || res.body.metadata.exit_code !== 0) throw new Error(`terminal failed: ${res.status} ${res.text}`);
}

/** One command as a fresh Docker exec, the way a per-call design would run it. */
async function plainExec(container: Docker.Container): Promise<void> {
  const exec = await container.exec({ Cmd: ['bash', '-c', 'true'], User: '1000:1000', AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new Error(`exec exited ${info.ExitCode}`);
}

function report(figures: Figure[]): void {
  const rows = figures.map((f) => [f.name, String(f.samples.length), ms(percentile(f.samples, 50)), ms(percentile(f.samples, 99)), f.target ?? '']);
  const header = ['measure', 'n', 'p50', 'p99', 'target'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 || i === 4 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}\n`);
  const terminalP50 = percentile(figures.find((f) => f.name.startsWith('terminal'))!.samples, 50);
  const execP50 = percentile(figures.find((f) => f.name.startsWith('plain'))!.samples, 50);
  process.stdout.write(`\nterminal / plain exec (p50): ${(terminalP50 / execP50).toFixed(3)}  (target ≤ 0.25)\n`);
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
