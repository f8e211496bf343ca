/**
 * Sandboxes at density, and new sessions with default settings, printed, never asserted
 * (run with `./runbox bench load`).
 *
 *   first call        a new session's first `terminal true` through the HTTP API, one new
 *                     session a second: with default settings, and with the warm pool off
 *                     (the in-run baseline)
 *   32 runs at once   32 runs started together, each on a new session, each making two
 *                     terminal calls (scripted model): created → all completed, default
 *                     settings and pool off; then again 30 s later; and where each burst's
 *                     time went: POST answered, queued, tool calls (the first one binds the
 *                     session's sandbox), and the rest of the run (model calls and Runbox's
 *                     own work between them), p50 and max over the 32 runs
 *   fixed rate at N   N live sessions (RUNBOX_LOAD_SESSIONS, default 10,50,100), then calls
 *                     sent on a fixed schedule, RUNBOX_LOAD_RATE a second (default 40) for
 *                     RUNBOX_LOAD_RATE_SECONDS (default 30), each to a random session, the
 *                     same mix as below: latency from each call's scheduled send time (so a
 *                     late client cannot hide a queue), p50/p99 overall and by tool, errors,
 *                     the rate achieved, how late the client sent, the host's CPU busy
 *                     meanwhile, the Postgres statements and transactions per call of the
 *                     gateway and the executor, CPU per call by process, calls the gateway's
 *                     session route cache should have known apart from the others, and how
 *                     clustered in time the slowest 1 % were; the smallest N is the in-run
 *                     baseline
 *   load at N         then, on the same N sessions, RUNBOX_LOAD_WORKERS clients (default 16)
 *                     for RUNBOX_LOAD_SECONDS
 *                     (default 10) each sending a mix of terminal, read_file, write_file and
 *                     grep to random sessions: throughput, p50/p99, errors; memory per
 *                     sandbox (host used-memory delta / N while idle and after the load,
 *                     the container's cgroup, the anonymous memory of its processes and
 *                     of its containerd shim, the executor's RSS delta / N); how long
 *                     growing took (RUNBOX_LOAD_GROW_PARALLEL sessions at once, default 8)
 *                     and the engine's events per sandbox made meanwhile; CPU per idle
 *                     sandbox per second and CPU per call, split into the sandboxes with
 *                     their shims, the engine (dockerd, containerd), executor and gateway
 *                     (the warm pool's containers apart); what the orphan sweep's two
 *                     listings cost the engine at N
 *
 * The gateway and executor run as processes of their own (BenchStack); everything they made
 * is removed at the end. RUNBOX_LOAD_SKIP_START=1 skips the first two figures,
 * RUNBOX_LOAD_SKIP_DENSITY=1 the others; RUNBOX_LOAD_BURST_TIMEOUT_SECONDS gives the burst's
 * terminal calls a time limit of their own.
 */
import { ScriptedModelServer } from '@app/testing';
import Docker from 'dockerode';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BenchStack, BenchTenant } from './support/bench-stack';
import { containerSeconds, processSeconds } from './support/cpu-per-call';
import { KeepAliveClient } from './support/keep-alive-client';
import { percentile } from './support/stats';

const FIRST_CALL_SAMPLES = 10;
const BURST_RUNS = 32;
const BURST_GAP_MS = 30_000;
const LOAD_SESSIONS = (process.env.RUNBOX_LOAD_SESSIONS ?? '10,50,100').split(',').map(Number);
const WORKERS = Number(process.env.RUNBOX_LOAD_WORKERS ?? 16);
const LOAD_SECONDS = Number(process.env.RUNBOX_LOAD_SECONDS ?? 10);
/**
 * The fixed rate, calls a second. The mix costs about 8 ms of CPU per call in all processes
 * together (docs/operations.md, CPU per call), so 40 a second keep about 16 % of 2 cores
 * busy: far enough below saturation that a call seldom waits behind another for a core,
 * and what N does to latency is not hidden behind a CPU queue.
 */
const RATE = Number(process.env.RUNBOX_LOAD_RATE ?? 40);
const RATE_SECONDS = Number(process.env.RUNBOX_LOAD_RATE_SECONDS ?? 30);
/** How long the gateway routes a session's tool calls without reading it again (SessionRouteCache in sessions.service.ts). */
const SESSION_ROUTE_TTL_MS = 2_000;
/** How many sessions get their sandbox at once while the bench grows to N. */
const GROW_PARALLEL = Number(process.env.RUNBOX_LOAD_GROW_PARALLEL ?? 8);
/**
 * The burst's terminal calls ask for this `timeout_seconds` (RUNBOX_LOAD_BURST_TIMEOUT_SECONDS;
 * unset, the terminal's default of 120 s): a short one shows whether a call that waited for
 * its cold sandbox longer than its own limit still completes.
 */
const BURST_CALL_TIMEOUT = process.env.RUNBOX_LOAD_BURST_TIMEOUT_SECONDS ? { timeout_seconds: Number(process.env.RUNBOX_LOAD_BURST_TIMEOUT_SECONDS) } : {};
/** The machine is shared: growing stops (and the figures say so) when less than this is available. */
const MIN_AVAILABLE_BYTES = 4 * 2 ** 30;
const image = process.env.RUNBOX_SANDBOX_IMAGE ?? 'runbox-sandbox:latest';

async function main(): Promise<void> {
  process.stdout.write(`load bench: ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}, image ${image}\n`);
  if (process.env.RUNBOX_LOAD_SKIP_START !== '1') {
    const off = await startFigures({ RUNBOX_WARM_POOL_SIZE: '0' });
    const defaults = await startFigures({});
    printTable(
      ['measure', 'n', 'pool off p50', 'p99', 'default p50', 'p99', 'default / off'],
      [
        row('first call on a new session', off.firstCall, defaults.firstCall),
        row('second call on that session', off.laterCall, defaults.laterCall),
        row('32 runs at once, all done', [off.burst], [defaults.burst]),
        row('32 runs at once, 30 s later', [off.burstAgain], [defaults.burstAgain]),
      ],
    );
  }
  if (process.env.RUNBOX_LOAD_SKIP_DENSITY !== '1') await loadFigures();
}

/** First-call latency and the 32-runs burst on one stack. */
async function startFigures(env: Record<string, string>): Promise<{ firstCall: number[]; laterCall: number[]; burst: number; burstAgain: number }> {
  const model = new ScriptedModelServer();
  // Every request of every run: two terminal calls, then an answer.
  const step = (request: Parameters<typeof ScriptedModelServer.firstUserMessage>[0]) => {
    const done = request.body.messages.filter((m) => m.role === 'tool').length;
    return done < 2 ? { toolCalls: [{ name: 'terminal', arguments: { command: `echo step-${done}`, ...BURST_CALL_TIMEOUT } }] } : { content: 'done' };
  };
  model.route(() => true, ...Array.from({ length: 3 * BURST_RUNS * 2 + 10 }, () => step));
  const modelUrl = await model.start();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image, RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', ...env });
  try {
    await stack.start();
    // Limits above the burst: the figure is the platform's, not a tenant quota's.
    const tenant = await stack.createTenant('first-call', { max_concurrent_runs: 4 * BURST_RUNS, max_sandboxes: 1000, runs_per_minute: 10_000 });
    // One session first: connections and caches warm, and the executor has seen a session.
    await firstCall(stack, tenant);
    await pause(2_000);
    const firstCall_: number[] = [];
    const laterCall: number[] = [];
    for (let i = 0; i < FIRST_CALL_SAMPLES; i++) {
      const { first, later } = await firstCall(stack, tenant);
      firstCall_.push(first);
      laterCall.push(later);
      // One new session a second: the arrival rate, not an ordering wait.
      await pause(1_000);
    }
    const burst = await runBurst(stack, tenant);
    // The next burst half a minute later: what a pool sized by the first one does for it.
    await pause(BURST_GAP_MS);
    const burstAgain = await runBurst(stack, tenant);
    return { firstCall: firstCall_, laterCall, burst, burstAgain };
  } finally {
    await stack.stop();
    await model.stop();
  }
}

/** A new session's first call, then the same call again on it: what binding a sandbox adds is the difference. */
async function firstCall(stack: BenchStack, tenant: BenchTenant): Promise<{ first: number; later: number }> {
  const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
  const started = performance.now();
  await tool(stack, tenant, session.body.id, 'terminal', { command: 'true' });
  const first = performance.now() - started;
  const again = performance.now();
  await tool(stack, tenant, session.body.id, 'terminal', { command: 'true' });
  return { first, later: performance.now() - again };
}

/** 32 runs at once, each a new session with two terminal calls: ms until all completed. */
async function runBurst(stack: BenchStack, tenant: BenchTenant): Promise<number> {
  const started = performance.now();
  let retried = 0;
  const postMs: number[] = [];
  const runs = await Promise.all(
    Array.from({ length: BURST_RUNS }, async (_, i) => {
      // A 503 says "try again shortly", and a client does: part of the time it takes.
      for (let attempt = 0; ; attempt++) {
        const res = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: `burst ${i}`, toolset: 'coding' } });
        postMs.push(performance.now() - started);
        if (res.status === 202) return res.body.id as string;
        if (res.status !== 503 || attempt >= 20) throw new Error(`starting a run failed: ${res.status} ${res.text}`);
        retried++;
        await pause(100);
      }
    }),
  );
  const failed = (await Promise.all(runs.map((id) => waitForRun(stack, tenant, id)))).filter((status) => status !== 'completed');
  const elapsed = performance.now() - started;
  if (failed.length > 0 || retried > 0) process.stdout.write(`  burst: ${failed.length} of ${BURST_RUNS} runs did not complete; ${retried} starts answered 503 and were retried\n`);
  await printBurstParts(stack, runs, postMs, elapsed);
  // Sessions deleted between bursts, so the second one starts from live-sandbox count 0 too.
  const sessions = await Promise.all(runs.map(async (id) => (await stack.request('GET', `/v1/runs/${id}`, { key: tenant.apiKey })).body.session_id as string));
  await Promise.all(sessions.map((id) => stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })));
  return elapsed;
}

/** Where a burst's time went, from the runs' and their tool calls' own timestamps (no API shows the calls' times). */
async function printBurstParts(stack: BenchStack, runIds: string[], postMs: number[], elapsed: number): Promise<void> {
  const client = new Client({ connectionString: stack.systemDatabaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ queued: number; running: number; tools: number; first_tool: number | null }>(
      `SELECT extract(epoch FROM r.started_at - r.created_at) * 1000 AS queued,
              extract(epoch FROM r.completed_at - r.started_at) * 1000 AS running,
              coalesce((SELECT sum(extract(epoch FROM t.completed_at - t.started_at)) FROM tool_calls t WHERE t.run_id = r.id), 0) * 1000 AS tools,
              (SELECT extract(epoch FROM t.completed_at - t.started_at) * 1000 FROM tool_calls t WHERE t.run_id = r.id ORDER BY t.started_at LIMIT 1) AS first_tool
         FROM runs r WHERE r.id = ANY($1::text[]) AND r.completed_at IS NOT NULL`,
      [runIds],
    );
    const figure = (name: string, values: number[]) =>
      `${name} p50 ${ms(percentile(values, 50))}, max ${ms(Math.max(...values))}`;
    const parts = [
      figure('POST answered', postMs),
      figure('queued', rows.map((r) => Number(r.queued))),
      figure('first tool call', rows.map((r) => Number(r.first_tool ?? 0))),
      figure('tool calls', rows.map((r) => Number(r.tools))),
      figure('rest of the run', rows.map((r) => Number(r.running) - Number(r.tools))),
    ];
    process.stdout.write(`  burst of ${BURST_RUNS}, all done in ${ms(elapsed)}: ${parts.join('; ')}\n`);
  } finally {
    await client.end();
  }
}

/** Its final status; a failure is printed and counted, not thrown: it is part of the figure. */
async function waitForRun(stack: BenchStack, tenant: BenchTenant, runId: string): Promise<string> {
  for (;;) {
    const run = await stack.request('GET', `/v1/runs/${runId}`, { key: tenant.apiKey });
    if (run.body?.status === 'completed') return run.body.status as string;
    if (['failed', 'cancelled'].includes(run.body?.status)) {
      process.stdout.write(`  run ${runId} ${run.body.status}: ${JSON.stringify(run.body.error).slice(0, 200)}\n`);
      return run.body.status as string;
    }
    await pause(20);
  }
}

interface LoadFigure {
  sessions: number;
  calls: number;
  errors: number;
  perSecond: number;
  latencies: number[];
  hostIdlePerSandboxMb: number;
  hostPerSandboxMb: number;
  cgroupMb: number;
  processAnonMb: number;
  shimAnonMb: number;
  /** CPU the idle sessions' sandboxes (their processes and shims) used, in % of one core. */
  idleCpuPercent: number;
  /** The warm pool's containers meanwhile: how many, and their CPU in % of one core (kept apart: the pool's size is no part of N). */
  poolContainers: number;
  poolCpuPercent: number;
  /** CPU per idle sandbox per second, in ms: the sandboxes with their shims, the engine (dockerd, containerd), the executor. */
  idleCpu: CpuSplit;
  /** CPU per tool call of the mixed load, in ms, split the same way (the gateway too). */
  cpuPerCall: CpuSplit;
  executorPerSandboxMb: number;
  /** Seconds it took to make the sandboxes added for this N. */
  growSeconds: number;
  /** What the engine did per sandbox made while growing to this N, by event (`container create`, `exec_start`...). */
  engineEvents: Map<string, number>;
  /** The same mix at a fixed offered rate (open loop). */
  fixedRate: FixedRateFigure;
  /** What the orphan sweep's two listings (containers, volumes) cost the engine at this N, in ms of CPU and of wall time. */
  listing: { engineMs: number; wallMs: number };
}

interface FixedRateFigure {
  /** Each answered call's latency from its scheduled send time, in ms. */
  latencies: number[];
  byTool: Map<string, number[]>;
  /**
   * Split by whether the gateway's session route cache (2 s from a check, not extended by a
   * hit) should have known the session when the call was sent: a miss reads the session in
   * a tenant transaction first. At a fixed rate each session's calls come N / rate seconds
   * apart, so misses grow with N.
   */
  routeHit: number[];
  routeMiss: number[];
  /** In how many distinct seconds of the phase the slowest 1 % of calls were due: few means one stall, many a steady queue. */
  slowestSeconds: number;
  errors: number;
  /** Calls answered per second, from the first scheduled send to the last answer. */
  achieved: number;
  /** How late the client sent each call after its scheduled time, in ms (counted in the latency). */
  sendLag: number[];
  /** The host's CPU busy meanwhile, in % of all its cores (neighbours included). */
  hostBusyPercent: number;
  /** CPU per call, in ms, by process (the idle sandboxes' and the engine's own share included: what N adds shows here). */
  cpuPerCall: CpuSplit;
  /** Postgres statements and transactions per call sent, by service. */
  gatewayStatements: number;
  gatewayTransactions: number;
  executorStatements: number;
}

interface CpuSplit {
  sandboxes: number;
  /** The part of `sandboxes` spent in the containers' shims (containerd-shim-runc-v2, one per container). */
  shims: number;
  engine: number;
  executor: number;
  gateway: number;
}

/** N live sessions under a mixed load, for each N of RUNBOX_LOAD_SESSIONS. */
async function loadFigures(): Promise<void> {
  const max = Math.max(...LOAD_SESSIONS);
  // Counting statements: what a call costs in Postgres round trips may grow with N where its latency does not show it.
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image, RUNBOX_EXECUTOR_MAX_SANDBOXES: String(max + 16) }, { countCosts: true });
  const figures: LoadFigure[] = [];
  let client: KeepAliveClient | undefined;
  try {
    await stack.start();
    const tenant = await stack.createTenant('load', { max_sandboxes: max + 16, max_sessions: max + 16 });
    client = new KeepAliveClient(stack.url, tenant.apiKey);
    const sessions: string[] = [];
    await settleHost();
    const hostBefore = hostUsedBytes();
    const executorBefore = rssBytes(stack.executorPid);
    for (const wanted of LOAD_SESSIONS) {
      const growStarted = performance.now();
      const before = sessions.length;
      const events = watchEngineEvents(stack.executorId);
      const n = await grow(stack, tenant, sessions, wanted);
      const growSeconds = (performance.now() - growStarted) / 1000;
      const engineEvents = await events.stop(Math.max(1, n - before));
      await settleHost();
      // The pool grew while new sessions took its containers: its refill is not idle cost.
      await settledContainers(stack.executorId);
      const hostIdlePerSandboxMb = mb((hostUsedBytes() - hostBefore) / n);
      const bound = await boundContainers(stack);
      const running = executorContainers(stack.executorId);
      const containers = running.filter((id) => bound.has(id));
      const pool = running.filter((id) => !bound.has(id));
      const memory = containerMemory(containers);
      const idle = await idleCpu(containers, pool, stack);
      const fixedRate = await fixedRateLoad(stack, client, sessions);
      const listing = await sweepListingCost(stack.executorId);
      const cpuBefore = cpuSnapshot(executorContainers(stack.executorId), stack);
      const load = await mixedLoad(stack, tenant, sessions);
      const cpuUsed = cpuSince(cpuBefore, cpuSnapshot(executorContainers(stack.executorId), stack));
      figures.push({
        sessions: n,
        ...load,
        hostIdlePerSandboxMb,
        idleCpuPercent: idle.percent,
        idleCpu: idle.perSandbox,
        poolContainers: pool.length,
        poolCpuPercent: idle.poolPercent,
        cpuPerCall: divide(cpuUsed, Math.max(1, load.calls)),
        hostPerSandboxMb: mb((hostUsedBytes() - hostBefore) / n),
        ...memory,
        executorPerSandboxMb: mb((rssBytes(stack.executorPid) - executorBefore) / n),
        growSeconds,
        engineEvents,
        fixedRate,
        listing,
      });
      process.stdout.write(
        `  N=${n}: grown in ${growSeconds.toFixed(1)} s; ${RATE}/s: p99 ${ms(orNaN(fixedRate.latencies, 99))}, ${fixedRate.errors} errors; ` +
          `closed loop: ${load.calls} calls, ${load.errors} errors, p99 ${ms(percentile(load.latencies, 99))}; load ${loadavg()[0].toFixed(1)}\n`,
      );
      if (n < wanted) break;
    }
  } finally {
    client?.close();
    // Printed before the stack is removed (minutes at N = 500), and what was measured is printed after a failure too.
    printLoadFigures(figures);
    await stack.stop();
  }
}

function printLoadFigures(figures: LoadFigure[]): void {
  printFixedRate(figures);
  const base = figures[0];
  if (!base) return;
  printTable(
    ['N', 'calls/s', 'p50', 'p99', 'errors', 'p99 / N=' + base.sessions, 'host MB/idle sandbox', 'host MB/sandbox, loaded', 'cgroup MB', 'procs anon MB', 'shim anon MB', 'idle CPU %', 'pool: containers', 'CPU %', 'executor MB/sandbox'],
    figures.map((f) => [
      String(f.sessions),
      f.perSecond.toFixed(0),
      ms(percentile(f.latencies, 50)),
      ms(percentile(f.latencies, 99)),
      String(f.errors),
      (percentile(f.latencies, 99) / percentile(base.latencies, 99)).toFixed(2),
      f.hostIdlePerSandboxMb.toFixed(1),
      f.hostPerSandboxMb.toFixed(1),
      f.cgroupMb.toFixed(1),
      f.processAnonMb.toFixed(1),
      f.shimAnonMb.toFixed(1),
      f.idleCpuPercent.toFixed(1),
      String(f.poolContainers),
      f.poolCpuPercent.toFixed(1),
      f.executorPerSandboxMb.toFixed(2),
    ]),
  );
  printTable(
    ['N', 'grown in', 'idle CPU ms/s per sandbox: sandbox+shim', 'of it shim', 'engine', 'executor', 'CPU ms per call: sandboxes', 'engine', 'executor', 'gateway'],
    figures.map((f) => [
      String(f.sessions),
      `${f.growSeconds.toFixed(1)} s`,
      f.idleCpu.sandboxes.toFixed(3),
      f.idleCpu.shims.toFixed(3),
      f.idleCpu.engine.toFixed(3),
      f.idleCpu.executor.toFixed(3),
      f.cpuPerCall.sandboxes.toFixed(2),
      f.cpuPerCall.engine.toFixed(2),
      f.cpuPerCall.executor.toFixed(2),
      f.cpuPerCall.gateway.toFixed(2),
    ]),
  );
  process.stdout.write('(engine: dockerd and containerd, shared with anything else on the machine)\n');
  for (const f of figures) {
    process.stdout.write(`the sweep's listings at N=${f.sessions} (once a minute): engine CPU ${ms(f.listing.engineMs)}, wall ${ms(f.listing.wallMs)}\n`);
  }
  for (const f of figures) {
    const events = [...f.engineEvents].map(([event, count]) => `${event} ${count.toFixed(1)}`).join(', ');
    process.stdout.write(`engine events per sandbox made, growing to N=${f.sessions}: ${events}\n`);
  }
}

/**
 * The engine's events for this executor's containers (sandboxes, pool refills, disk helpers)
 * from now until `stop`, per sandbox made: each is one or more Docker API calls. Watched
 * live: the engine keeps only its last 256 events for a later `--since` query.
 */
function watchEngineEvents(executorId: string): { stop(made: number): Promise<Map<string, number>> } {
  const watcher = spawn('docker', ['events', '--filter', `label=runbox.executor=${executorId}`, '--format', '{{.Type}} {{.Action}}'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const counts = new Map<string, number>();
  let rest = '';
  watcher.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    // `exec_start: runbox_agent.py attach` and the like: the action without its command.
    for (const line of lines.filter(Boolean)) counts.set(line.split(':')[0], (counts.get(line.split(':')[0]) ?? 0) + 1);
  });
  return {
    async stop(made: number) {
      // The last events of the growth reach the watcher a moment after the engine emits them.
      await pause(1_000);
      const exited = new Promise((resolve) => watcher.once('exit', resolve));
      watcher.kill();
      await exited;
      return new Map([...counts].sort(([a], [b]) => a.localeCompare(b)).map(([event, count]) => [event, count / made]));
    },
  };
}

/**
 * Brings the live sessions up to `n`, each with its sandbox made and a 4 KB file in it,
 * GROW_PARALLEL at a time; stops early when the host runs short of memory. Returns how many live.
 */
async function grow(stack: BenchStack, tenant: BenchTenant, sessions: string[], n: number): Promise<number> {
  const add = async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    if (session.status !== 201) throw new Error(`creating a session failed: ${session.status} ${session.text}`);
    await tool(stack, tenant, session.body.id, 'write_file', { path: 'data.txt', content: `${'x'.repeat(63)}\n`.repeat(64) });
    sessions.push(session.body.id);
  };
  while (sessions.length < n) {
    if (availableBytes() < MIN_AVAILABLE_BYTES) {
      process.stdout.write(`  stopped growing at ${sessions.length} sessions: less than ${mb(MIN_AVAILABLE_BYTES)} MiB available\n`);
      break;
    }
    await Promise.all(Array.from({ length: Math.min(GROW_PARALLEL, n - sessions.length) }, add));
  }
  return sessions.length;
}

const MIX: Array<[string, (i: number) => Record<string, unknown>]> = [
  ['terminal', () => ({ command: 'echo hi' })],
  ['read_file', () => ({ path: 'data.txt' })],
  ['write_file', (i) => ({ path: `out-${i % 8}.txt`, content: `line ${i}\n` })],
  ['grep', () => ({ pattern: 'x+', path: '.' })],
];

async function mixedLoad(stack: BenchStack, tenant: BenchTenant, sessions: string[]): Promise<Pick<LoadFigure, 'calls' | 'errors' | 'perSecond' | 'latencies'>> {
  const latencies: number[] = [];
  let errors = 0;
  let seq = 0;
  const until = performance.now() + LOAD_SECONDS * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const i = seq++;
      const [name, args] = MIX[i % MIX.length];
      const session = sessions[Math.floor(Math.random() * sessions.length)];
      const started = performance.now();
      try {
        await tool(stack, tenant, session, name, args(i));
        latencies.push(performance.now() - started);
      } catch {
        errors++;
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: WORKERS }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { calls: latencies.length + errors, errors, perSecond: latencies.length / seconds, latencies };
}

/**
 * The mix at a fixed offered rate (open loop): call k is due at start + k / RATE, whatever
 * the earlier calls are doing, and its latency counts from then. A closed loop sends its
 * next call only after an answer, so a slow phase sends fewer calls and the waiting it
 * causes goes unmeasured; here a client that fell behind (its own event loop busy) has
 * that lateness counted too, and printed on its own.
 */
async function fixedRateLoad(stack: BenchStack, client: KeepAliveClient, sessions: string[]): Promise<FixedRateFigure> {
  const total = Math.round(RATE * RATE_SECONDS);
  const latencies: number[] = [];
  const byTool = new Map<string, number[]>(MIX.map(([name]) => [name, []]));
  const sendLag: number[] = [];
  const routeHit: number[] = [];
  const routeMiss: number[] = [];
  const routeKnownUntil = new Map<string, number>();
  const timed: Array<{ due: number; ms: number }> = [];
  let errors = 0;
  let lastAnswer = 0;
  const [gatewayBefore, executorBefore] = [await stack.statementCounts('gateway'), await stack.statementCounts('executor')];
  const busyBefore = hostCpuTicks();
  const cpuBefore = cpuSnapshot(executorContainers(stack.executorId), stack);
  const answered: Array<Promise<void>> = [];
  const start = performance.now();
  for (let k = 0; k < total; k++) {
    const due = start + (k * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await pause(wait);
    sendLag.push(performance.now() - due);
    const [name, args] = MIX[k % MIX.length];
    const session = sessions[Math.floor(Math.random() * sessions.length)];
    const sent = performance.now();
    const hit = (routeKnownUntil.get(session) ?? 0) > sent;
    if (!hit) routeKnownUntil.set(session, sent + SESSION_ROUTE_TTL_MS);
    answered.push(
      toolOver(client, session, name, args(k)).then(
        () => {
          lastAnswer = performance.now();
          latencies.push(lastAnswer - due);
          byTool.get(name)!.push(lastAnswer - due);
          (hit ? routeHit : routeMiss).push(lastAnswer - due);
          timed.push({ due, ms: lastAnswer - due });
        },
        () => {
          errors++;
        },
      ),
    );
  }
  await Promise.all(answered);
  const busyAfter = hostCpuTicks();
  const cpuUsed = cpuSince(cpuBefore, cpuSnapshot(executorContainers(stack.executorId), stack));
  const [gatewayAfter, executorAfter] = [await stack.statementCounts('gateway'), await stack.statementCounts('executor')];
  return {
    latencies,
    byTool,
    routeHit,
    routeMiss,
    slowestSeconds: new Set(
      timed
        .sort((a, b) => b.ms - a.ms)
        .slice(0, Math.max(1, Math.ceil(timed.length / 100)))
        .map((t) => Math.floor((t.due - start) / 1000)),
    ).size,
    errors,
    achieved: latencies.length / (Math.max(1, lastAnswer - start) / 1000),
    sendLag,
    hostBusyPercent: (100 * (busyAfter.busy - busyBefore.busy)) / Math.max(1, busyAfter.total - busyBefore.total),
    cpuPerCall: divide(cpuUsed, total),
    gatewayStatements: (gatewayAfter.statements - gatewayBefore.statements) / total,
    gatewayTransactions: (gatewayAfter.transactions - gatewayBefore.transactions) / total,
    executorStatements: (executorAfter.statements - executorBefore.statements) / total,
  };
}

/** One tool call over a kept-alive connection (the fixed-rate phase: the client's own CPU kept small). */
async function toolOver(client: KeepAliveClient, sessionId: string, name: string, args: Record<string, unknown>): Promise<void> {
  const res = await client.post(`/v1/sessions/${sessionId}/tools/${name}`, { arguments: args });
  if (res.status !== 200 || (JSON.parse(res.text) as { is_error?: boolean }).is_error) throw new Error(`${name} failed: ${res.status} ${res.text.slice(0, 300)}`);
}

/** The host's CPU time so far, all cores, in clock ticks: busy (everything but idle and iowait) and total. */
function hostCpuTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - fields[3] - fields[4], total };
}

function printFixedRate(figures: LoadFigure[]): void {
  const base = figures[0];
  if (!base) return;
  process.stdout.write(`\nfixed rate: ${RATE} calls/s offered for ${RATE_SECONDS} s at each N, latency from the scheduled send (baseline N=${base.sessions})\n`);
  printTable(
    [
      'N', 'achieved/s', 'p50', 'p99', 'max', 'errors', `p99 / N=${base.sessions}`, 'send late p99', 'host CPU busy',
      'gateway stmts/call', 'txns/call', 'executor stmts/call', 'CPU ms/call: sandboxes', 'engine', 'executor', 'gateway',
    ],
    figures.map(({ sessions, fixedRate: r }) => [
      String(sessions),
      r.achieved.toFixed(1),
      ms(orNaN(r.latencies, 50)),
      ms(orNaN(r.latencies, 99)),
      ms(orNaN(r.latencies, 100)),
      String(r.errors),
      (orNaN(r.latencies, 99) / orNaN(base.fixedRate.latencies, 99)).toFixed(2),
      ms(orNaN(r.sendLag, 99)),
      `${r.hostBusyPercent.toFixed(0)} %`,
      r.gatewayStatements.toFixed(2),
      r.gatewayTransactions.toFixed(2),
      r.executorStatements.toFixed(2),
      r.cpuPerCall.sandboxes.toFixed(2),
      r.cpuPerCall.engine.toFixed(2),
      r.cpuPerCall.executor.toFixed(2),
      r.cpuPerCall.gateway.toFixed(2),
    ]),
  );
  for (const { sessions, fixedRate: r } of figures) {
    const tools = [...r.byTool].map(([name, values]) => `${name} ${orNaN(values, 50).toFixed(1)}/${orNaN(values, 99).toFixed(1)}`).join(', ');
    const route = (values: number[]) => `${values.length} calls, ${orNaN(values, 50).toFixed(1)}/${orNaN(values, 99).toFixed(1)}`;
    process.stdout.write(
      `N=${sessions} by tool, p50/p99 ms: ${tools}; session route cached: ${route(r.routeHit)}, not: ${route(r.routeMiss)}; ` +
        `the slowest 1 % due in ${r.slowestSeconds} distinct seconds of ${RATE_SECONDS}\n`,
    );
  }
}

async function tool(stack: BenchStack, tenant: BenchTenant, sessionId: string, name: string, args: Record<string, unknown>): Promise<void> {
  const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });
  if (res.status !== 200 || res.body.is_error) throw new Error(`${name} failed: ${res.status} ${res.text.slice(0, 300)}`);
}

/**
 * The two listings each orphan sweep makes (every container and every volume carrying the
 * executor's labels, as DockerSandboxDriver.listOwned and listOwnedVolumes ask for them):
 * the engine's CPU for them, and the wall time, each call made the way the driver makes it.
 */
async function sweepListingCost(executorId: string): Promise<{ engineMs: number; wallMs: number }> {
  const engineCpu = () => ['dockerd', 'containerd'].flatMap(pidsNamed).reduce((sum, pid) => sum + processCpuMs(pid), 0);
  const filters = { label: ['runbox.managed=true', `runbox.executor=${executorId}`] };
  const docker = new Docker();
  const before = engineCpu();
  const started = performance.now();
  await Promise.all([docker.listContainers({ all: true, filters }), docker.listVolumes({ filters })]);
  return { engineMs: engineCpu() - before, wallMs: performance.now() - started };
}

/** Ids of the executor's running containers: the sessions' and the warm pool's. */
function executorContainers(executorId: string): string[] {
  const out = execFileSync('docker', ['ps', '-q', '--no-trunc', '--filter', `label=runbox.executor=${executorId}`], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean);
}

/**
 * The containers bound to a session, from the executor's rows: a container handed out of
 * the warm pool keeps its `runbox.pool` label for life, so labels cannot tell them apart.
 */
async function boundContainers(stack: BenchStack): Promise<Set<string>> {
  const client = new Client({ connectionString: stack.systemDatabaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ container_id: string }>(
      `SELECT container_id FROM sandboxes WHERE executor_id = $1 AND state = 'ready' AND container_id IS NOT NULL`,
      [stack.executorId],
    );
    return new Set(rows.map((r) => r.container_id));
  } finally {
    await client.end();
  }
}

/**
 * Averages over the containers: cgroup usage, the anonymous memory of its processes and of
 * its containerd shim. Anonymous, not RSS: the pages of the interpreter, libraries and shim
 * binary are shared by every container, so each more sandbox costs only its private memory.
 */
function containerMemory(ids: string[]): Pick<LoadFigure, 'cgroupMb' | 'processAnonMb' | 'shimAnonMb'> {
  const shims = shimAnonById();
  let usage = 0;
  let procs = 0;
  let shim = 0;
  let n = 0;
  for (const id of ids) {
    const dir = `/sys/fs/cgroup/memory/docker/${id}`;
    try {
      usage += Number(readFileSync(`${dir}/memory.usage_in_bytes`, 'utf8'));
      for (const pid of readFileSync(`${dir}/cgroup.procs`, 'utf8').split('\n').filter(Boolean)) procs += anonBytes(Number(pid));
      shim += shims.get(id) ?? 0;
      n++;
    } catch {
      // Removed since it was listed (a warm container the pool let go): not counted.
    }
  }
  n = Math.max(1, n);
  return { cgroupMb: mb(usage / n), processAnonMb: mb(procs / n), shimAnonMb: mb(shim / n) };
}

const IDLE_CPU_WINDOW_MS = 10_000;

/**
 * CPU time the sessions' containers (every process in them) and their shims use over a few
 * idle seconds, in % of one core: what N sandboxes that do nothing take from the calls; and
 * the same for the warm pool's containers, apart.
 */
async function idleCpu(ids: string[], pool: string[], stack: BenchStack): Promise<{ percent: number; perSandbox: CpuSplit; poolPercent: number }> {
  const before = cpuSnapshot([...ids, ...pool], stack);
  await pause(IDLE_CPU_WINDOW_MS);
  const after = cpuSnapshot([...ids, ...pool], stack);
  const used = cpuSince(before, after, ids);
  const poolMs = cpuSince(before, after, pool).sandboxes;
  return {
    percent: (used.sandboxes / IDLE_CPU_WINDOW_MS) * 100,
    perSandbox: divide(used, (Math.max(1, ids.length) * IDLE_CPU_WINDOW_MS) / 1000),
    poolPercent: (poolMs / IDLE_CPU_WINDOW_MS) * 100,
  };
}

interface CpuSnapshot {
  sandboxes: Map<string, { all: number; shim: number }>;
  engine: number;
  executor: number;
  gateway: number;
}

/** CPU time so far, in ms: each sandbox with its shim, the engine's daemons, the executor, the gateway. */
function cpuSnapshot(ids: string[], stack: BenchStack): CpuSnapshot {
  const engine = ['dockerd', 'containerd'].flatMap(pidsNamed).reduce((sum, pid) => sum + processCpuMs(pid), 0);
  return { sandboxes: sandboxCpuMs(ids), engine, executor: processCpuMs(stack.executorPid), gateway: processCpuMs(stack.gatewayPid) };
}

function cpuSince(before: CpuSnapshot, after: CpuSnapshot, only?: readonly string[]): CpuSplit {
  let sandboxes = 0;
  let shims = 0;
  // Only containers seen both times: one the pool let go meanwhile took its whole past with it.
  for (const [id, now] of after.sandboxes) {
    const then = before.sandboxes.get(id);
    if (!then || (only && !only.includes(id))) continue;
    sandboxes += now.all - then.all;
    shims += now.shim - then.shim;
  }
  return { sandboxes, shims, engine: after.engine - before.engine, executor: after.executor - before.executor, gateway: after.gateway - before.gateway };
}

function divide(split: CpuSplit, by: number): CpuSplit {
  return { sandboxes: split.sandboxes / by, shims: split.shims / by, engine: split.engine / by, executor: split.executor / by, gateway: split.gateway / by };
}

/** utime + stime of one process, in ms; 0 if it is gone. */
function processCpuMs(pid: number): number {
  return (processSeconds(pid) ?? 0) * 1000;
}

function pidsNamed(name: string): number[] {
  try {
    return execFileSync('pgrep', ['-x', name], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** CPU time so far of each container (its processes) plus its shim, in ms, by container id. */
function sandboxCpuMs(ids: string[]): Map<string, { all: number; shim: number }> {
  const shims = shimPidsById();
  const out = new Map<string, { all: number; shim: number }>();
  for (const id of ids) {
    const shim = shims.get(id);
    const container = containerSeconds(id);
    // Gone meanwhile when either cannot be read.
    if (shim !== undefined && container !== undefined) {
      const shimMs = processCpuMs(shim);
      out.set(id, { all: container * 1000 + shimMs, shim: shimMs });
    }
  }
  return out;
}

/** The anonymous memory of each container's containerd-shim, by container id. */
function shimAnonById(): Map<string, number> {
  return new Map([...shimPidsById()].map(([id, pid]) => [id, anonBytes(pid)]));
}

/** Each container's containerd-shim process, by container id. */
function shimPidsById(): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!args[0]?.includes('containerd-shim')) continue;
      const id = args[args.indexOf('-id') + 1];
      if (id) out.set(id, Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function rssBytes(pid: number): number {
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** A process's private anonymous memory (heap, stacks): what it adds beyond shared files. */
function anonBytes(pid: number): number {
  try {
    return Number(/^Anonymous:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

function availableBytes(): number {
  return Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0) * 1024;
}

/** Host memory in use, page cache excluded: MemTotal - MemAvailable. */
function hostUsedBytes(): number {
  const info = readFileSync('/proc/meminfo', 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(info)?.[1] ?? 0) * 1024;
  return kb('MemTotal') - kb('MemAvailable');
}

/** Waits (60 s at most) until the executor's containers stop coming and going: the pool has refilled. */
async function settledContainers(executorId: string): Promise<void> {
  const deadline = performance.now() + 60_000;
  let last = '';
  for (;;) {
    const now = execFileSync('docker', ['ps', '-aq', '--filter', `label=runbox.executor=${executorId}`], { encoding: 'utf8' });
    if (now === last || performance.now() > deadline) return;
    last = now;
    await pause(3_000);
  }
}

/** Lets a pool refill and the engine settle before memory is read. */
function settleHost(): Promise<void> {
  return pause(5_000);
}

function row(name: string, off: number[], defaults: number[]): string[] {
  const [offP50, defP50] = [percentile(off, 50), percentile(defaults, 50)];
  return [name, String(off.length), ms(offP50), ms(percentile(off, 99)), ms(defP50), ms(percentile(defaults, 99)), (defP50 / offP50).toFixed(3)];
}

function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}\n`);
}

/** The percentile, or NaN when there are no samples (a phase where every call failed): printed, not a crash. */
function orNaN(values: number[], p: number): number {
  return values.length ? percentile(values, p) : NaN;
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`;
}

function mb(bytes: number): number {
  return bytes / 2 ** 20;
}

function pause(ms_: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms_));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
