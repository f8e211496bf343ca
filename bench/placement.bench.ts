/**
 * Several executors, each on a Docker engine of its own, printed, never asserted (run with
 * `npm run bench:placement`):
 *
 *   balance     60 sessions placed (6 at a time) on 3 executors of capacity 30 each: the
 *               most and fewest sandboxes one executor got
 *   loss        kill -9 of an executor until the gateway counts it lost (heartbeat 2 s, so
 *               the configured bound is 6 s), and how long a call to one of its sessions
 *               takes to answer 503 right after the kill
 *   throughput  `terminal true` calls through the HTTP API, 12 at a time over 12 sessions,
 *               with all sessions on 1 executor vs spread over 3: calls/s, p50, p99
 *
 * The gateway runs in this process (the test stack); the executors are processes of their
 * own, one on the host's engine and two on extra dockerd processes. Everything it made is
 * removed at the end.
 */
import { removeExecutorResources } from '@app/testing';
import Docker from 'dockerode';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { DockerEngine } from '../test/support/docker-engines';
import { ExecutorProcess } from '../test/support/executor-processes';
import { TenantCredentials, TestStack } from '../test/support/test-stack';

const SESSIONS = 60;
const CAPACITY = 30;
const CALLS = 360;
const CONCURRENCY = 12;
const LOSS_TRIALS = 3;

interface Ctx {
  stack: TestStack;
  tenant: TenantCredentials;
  engines: Array<{ docker: Docker; host?: string }>;
  executors: ExecutorProcess[];
}

async function main(): Promise<void> {
  process.stdout.write(`placement bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? 'runbox-sandbox:latest';
  let t = performance.now();
  const extra = await Promise.all([DockerEngine.start(), DockerEngine.start()]);
  await Promise.all(extra.map((e) => e.loadImage(image)));
  process.stdout.write(`setup: two extra engines started and the sandbox image loaded into them in ${ms(performance.now() - t)}\n`);
  const stack = await new TestStack({ executor: false, env: { RUNBOX_SANDBOX_DISK_MB: '0' } }).start();
  const ctx: Ctx = {
    stack,
    tenant: await stack.createTenant('bench', { max_sandboxes: 200, max_sessions: 1000 }),
    engines: [{ docker: new Docker() }, ...extra.map((e) => ({ docker: e.client, host: e.host }))],
    executors: [],
  };
  try {
    ctx.executors = ctx.engines.map(({ host }, i) => {
      const env: Record<string, string> = { ...stack.serviceEnv, RUNBOX_EXECUTOR_MAX_SANDBOXES: String(CAPACITY), RUNBOX_SANDBOX_IMAGE: image, RUNBOX_LOG_LEVEL: 'warn' };
      if (host) env.DOCKER_HOST = host;
      return new ExecutorProcess(`bench-place-${i}`, env);
    });
    const serving = (id: string) => isServing(stack, id);

    // Throughput on one executor first, before the others exist.
    await ctx.executors[0].start(serving);
    const single = await throughput(ctx, await sessions(ctx, CONCURRENCY, 1));
    // The balance is measured from empty executors.
    for (const id of single.sessions) await ctx.stack.request('DELETE', `/v1/sessions/${id}`, { key: ctx.tenant.apiKey });
    t = performance.now();
    await Promise.all(ctx.executors.slice(1).map((e) => e.start(serving)));
    process.stdout.write(`two more executors started in ${ms(performance.now() - t)}\n`);

    const placed = await sessions(ctx, SESSIONS, 6);
    const balance = await Promise.all(ctx.executors.map((e, i) => sandboxesOf(ctx.engines[i].docker, e.id)));
    process.stdout.write(`balance: ${SESSIONS} sessions on 3 executors (capacity ${CAPACITY} each, 6 placed at a time): ${balance.join(' / ')} → max ${Math.max(...balance)}, min ${Math.min(...balance)}\n`);

    const spread = await pickSpread(ctx, placed, CONCURRENCY);
    const triple = await throughput(ctx, spread);
    process.stdout.write(report('1 executor ', single));
    process.stdout.write(report('3 executors', triple));
    process.stdout.write(`throughput ratio 3 vs 1 executors: ${(triple.perSecond / single.perSecond).toFixed(2)}x\n`);

    await lossDetection(ctx, placed);
  } finally {
    for (const e of ctx.executors) await e.stop();
    for (const e of ctx.executors) await removeExecutorResources(e.id);
    await stack.stop();
    await Promise.all(extra.map((e) => e.stop()));
  }
}

async function isServing(stack: TestStack, id: string): Promise<boolean> {
  const res = await stack.request('GET', '/v1/admin/executors', { key: stack.adminToken });
  return (res.body.data as Array<{ id: string; standing: string; state: string }>).some((e) => e.id === id && e.standing === 'serving' && e.state === 'ready');
}

async function standing(stack: TestStack, id: string): Promise<string | undefined> {
  const res = await stack.request('GET', '/v1/admin/executors', { key: stack.adminToken });
  return (res.body.data as Array<{ id: string; standing: string }>).find((e) => e.id === id)?.standing;
}

const terminal = (ctx: Ctx, session: string, command: string) =>
  ctx.stack.request('POST', `/v1/sessions/${session}/tools/terminal`, { key: ctx.tenant.apiKey, body: { arguments: { command } } });

/** `count` new sessions, each placed by its first call, `parallel` at a time. */
async function sessions(ctx: Ctx, count: number, parallel: number): Promise<string[]> {
  const made: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        next++;
        const id = (await ctx.stack.request('POST', '/v1/sessions', { key: ctx.tenant.apiKey, body: {} })).body.id as string;
        const res = await terminal(ctx, id, 'true');
        if (res.status !== 200) throw new Error(`placing a session failed: ${res.status} ${res.text}`);
        made.push(id);
      }
    }),
  );
  return made;
}

async function sandboxesOf(docker: Docker, executorId: string): Promise<number> {
  return (await docker.listContainers({ filters: { label: [`runbox.executor=${executorId}`] } })).length;
}

/** `count` sessions, as evenly from each executor as the placement allows. */
async function pickSpread(ctx: Ctx, placed: string[], count: number): Promise<string[]> {
  const byExecutor = await Promise.all(
    ctx.executors.map(async (e, i) => {
      const containers = await ctx.engines[i].docker.listContainers({ filters: { label: [`runbox.executor=${e.id}`] } });
      const held = new Set(containers.map((c) => c.Labels['runbox.session']));
      return placed.filter((id) => held.has(id));
    }),
  );
  const picked: string[] = [];
  for (let round = 0; picked.length < count; round++) {
    for (const list of byExecutor) if (list[round] && picked.length < count) picked.push(list[round]);
  }
  return picked;
}

interface Throughput {
  sessions: string[];
  perSecond: number;
  p50: number;
  p99: number;
}

async function throughput(ctx: Ctx, sessionIds: string[]): Promise<Throughput> {
  for (const id of sessionIds) await terminal(ctx, id, 'true');
  const latencies: number[] = [];
  let issued = 0;
  const started = performance.now();
  await Promise.all(
    sessionIds.map(async (id) => {
      while (issued < CALLS) {
        issued++;
        const t = performance.now();
        const res = await terminal(ctx, id, 'true');
        if (res.status !== 200) throw new Error(`a call failed: ${res.status} ${res.text}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { sessions: sessionIds, perSecond: latencies.length / seconds, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) };
}

/** kill -9 the last executor, time until the gateway counts it lost, start it again; a few times. */
async function lossDetection(ctx: Ctx, placed: string[]): Promise<void> {
  const victim = ctx.executors[2];
  const containers = await ctx.engines[2].docker.listContainers({ filters: { label: [`runbox.executor=${victim.id}`] } });
  const session = placed.find((id) => containers.some((c) => c.Labels['runbox.session'] === id));
  if (!session) throw new Error('the third executor holds no session');
  const detections: number[] = [];
  const answers: number[] = [];
  for (let i = 0; i < LOSS_TRIALS; i++) {
    await victim.kill('SIGKILL');
    const killed = performance.now();
    const res = await terminal(ctx, session, 'true');
    answers.push(performance.now() - killed);
    if (res.status !== 503) throw new Error(`expected 503 after the kill, got ${res.status}`);
    while ((await standing(ctx.stack, victim.id)) === 'serving') await new Promise((r) => setTimeout(r, 20));
    detections.push(performance.now() - killed);
    await victim.start((id) => isServing(ctx.stack, id));
  }
  detections.sort((a, b) => a - b);
  answers.sort((a, b) => a - b);
  process.stdout.write(
    `loss detection (heartbeat 2 s, lost after 3 silent heartbeats = 6 s from the last one): ${detections.map(ms).join(', ')} over ${LOSS_TRIALS} kills; ` +
      `a call right after the kill answered 503 in ${answers.map(ms).join(', ')}\n`,
  );
}

function report(label: string, r: Throughput): string {
  return `throughput ${label}: ${r.perSecond.toFixed(1)} calls/s (${CALLS} calls, ${r.sessions.length} at a time), p50 ${ms(r.p50)}, p99 ${ms(r.p99)}\n`;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value.toFixed(1)} ms`;
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
