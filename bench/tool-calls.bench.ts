/**
 * Direct tool-call hot path: `./runbox bench tool-calls`. Prints figures; asserts nothing.
 *
 *   terminal `true`     POST /v1/sessions/{id}/tools/terminal on a ready sandbox
 *   read_file 4 KB      POST /v1/sessions/{id}/tools/read_file of a 4 KB file
 *   16 sessions         16 clients, one session each, calling terminal `true` back to back
 *                       for a fixed time: tool calls per second, and each call's p50/p99
 *   CPU ms per call     over both 16-session phases, the CPU each process on the path spent,
 *                       less what it spends idle, divided by the calls completed
 *                       (support/cpu-per-call.ts): it moves far less than the latencies
 *                       with the load of a shared machine, and its total says how many
 *                       calls per second an idle host could serve
 *
 * The baseline of each is the channel floor, measured in the same run on the same
 * containers: the same op sent straight into the sandbox agent over a channel of the
 * bench's own (one `docker exec` of the agent's attach relay, as the executor opens), so
 * the ratio is what the gateway, NATS and the executor add on top of the sandbox itself.
 *
 * Its own stack (a fresh database, a private NATS server, the gateway and the executor as
 * processes of their own, run from the build as production runs them); all of it, containers
 * and volumes included, is removed at the end.
 */
import Docker from 'dockerode';
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Client } from 'pg';
import { AgentChannel } from '../apps/executor/src/sandbox/agent-channel';
import { AGENT_COMMAND, AGENT_USER } from '../apps/executor/src/sandbox/sandbox-policy';
import { BenchStack, BenchTenant } from './support/bench-stack';
import {
  BENCH_CLIENT,
  containersSeconds,
  CpuSource,
  findProcesses,
  measureCpu,
  measureIdleCpu,
  ownSeconds,
  processesSeconds,
  processSeconds,
  reportCpu,
} from './support/cpu-per-call';
import { KeepAliveClient } from './support/keep-alive-client';
import { percentile, timeIt } from './support/stats';

const ROOT = join(__dirname, '..');
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 300);
const WARMUP = 30;
const PARALLEL_SESSIONS = 16;
const PARALLEL_SECONDS = Number(process.env.BENCH_PARALLEL_SECONDS ?? 10);
const FILE = 'bench-4k.txt';
/** How long each process's CPU is measured with no calls, to be subtracted from the phases. */
const IDLE_SECONDS = 3;

const docker = new Docker();

interface Figure {
  name: string;
  samples: number[];
  floor: number[];
  target: string;
}

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image }, { built: true });
  const channels: AgentChannel[] = [];
  let client: KeepAliveClient | undefined;
  try {
    await stack.start();
    const tenant = await stack.createTenant('bench', { max_sessions: 100, max_sandboxes: 100 });
    const api = (client = new KeepAliveClient(stack.url, tenant.apiKey));
    const sessions: string[] = [];
    for (let i = 0; i < PARALLEL_SESSIONS; i++) sessions.push(await newSession(stack, tenant, api));
    const containers: Docker.Container[] = [];
    for (const session of sessions) containers.push(await containerOf(stack, session));
    for (const container of containers) channels.push(await openChannel(container));
    const [first] = sessions;
    const content = 'x'.repeat(63) + '\n';
    await expectOk(toolCall(api, first, 'write_file', { path: FILE, content: content.repeat(64) }));

    const load = loadavg().map((l) => l.toFixed(1)).join(' ');
    console.log(`runbox tool-call bench (image ${image}; ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);

    const figures: Figure[] = [];
    const terminalHttp = () => expectOk(toolCall(api, first, 'terminal', { command: 'true' }));
    const terminalFloor = () => expectChannelOk(channels[0].call('terminal', { command: 'true' }, 30_000));
    figures.push({ name: 'terminal `true`', ...(await interleaved(terminalHttp, terminalFloor)), target: 'p50 ≤ 4 ms' });
    const readHttp = () => expectOk(toolCall(api, first, 'read_file', { path: FILE }));
    const readFloor = () => expectChannelOk(channels[0].call('read_file', { path: FILE, max_output_chars: 30_000 }, 30_000));
    figures.push({ name: 'read_file 4 KB', ...(await interleaved(readHttp, readFloor)), target: 'p50 ≤ 3 ms' });
    report(figures);

    const sources = cpuSources(stack, containers.map((c) => c.id));
    const idle = await measureIdleCpu(sources, IDLE_SECONDS);
    let http = { perSecond: 0, samples: [] as number[] };
    let floor = { perSecond: 0, samples: [] as number[] };
    const cpu = [
      await measureCpu('through the API', false, sources, async () => {
        http = await parallel((i) => expectOk(toolCall(api, sessions[i], 'terminal', { command: 'true' })));
        return http.samples.length;
      }),
      await measureCpu('channel floor', true, sources, async () => {
        floor = await parallel((i) => expectChannelOk(channels[i].call('terminal', { command: 'true' }, 30_000)));
        return floor.samples.length;
      }),
    ];
    console.log(`\n${PARALLEL_SESSIONS} sessions in parallel, terminal \`true\`, ${PARALLEL_SECONDS} s each way`);
    console.log(`  through the API    ${http.perSecond.toFixed(0)} calls/s  (p50 ${ms(percentile(http.samples, 50))}, p99 ${ms(percentile(http.samples, 99))})  target ≥ 600 calls/s`);
    console.log(`  channel floor      ${floor.perSecond.toFixed(0)} calls/s  (p50 ${ms(percentile(floor.samples, 50))}, p99 ${ms(percentile(floor.samples, 99))})`);
    console.log(`  API / floor        ${(http.perSecond / floor.perSecond).toFixed(2)}  (load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
    reportCpu(sources, idle, cpu);
  } finally {
    for (const channel of channels) channel.close('bench done');
    client?.close();
    await stack.stop();
  }
}

/**
 * Both ways of making the same call, alternated sample by sample so a change in the
 * machine's load (it is shared) weighs on both alike.
 */
async function interleaved(http: () => Promise<unknown>, floor: () => Promise<unknown>): Promise<{ samples: number[]; floor: number[] }> {
  for (let i = 0; i < WARMUP; i++) {
    await http();
    await floor();
  }
  const samples: number[] = [];
  const floorSamples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    samples.push(...(await timeIt(1, http)));
    floorSamples.push(...(await timeIt(1, floor)));
  }
  return { samples, floor: floorSamples };
}

/** PARALLEL_SESSIONS loops of `call(i)`, back to back, for PARALLEL_SECONDS. */
async function parallel(call: (i: number) => Promise<unknown>): Promise<{ perSecond: number; samples: number[] }> {
  const samples: number[] = [];
  const started = performance.now();
  const until = started + PARALLEL_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: PARALLEL_SESSIONS }, async (_, i) => {
      while (performance.now() < until) {
        const t = performance.now();
        await call(i);
        samples.push(performance.now() - t);
      }
    }),
  );
  return { perSecond: samples.length / ((performance.now() - started) / 1000), samples };
}

async function newSession(stack: BenchStack, tenant: BenchTenant, api: KeepAliveClient): Promise<string> {
  const res = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
  if (res.status !== 201) throw new Error(`POST /v1/sessions answered ${res.status}: ${res.text}`);
  const id = res.body.id as string;
  await expectOk(toolCall(api, id, 'terminal', { command: 'true' }));
  return id;
}

function toolCall(api: KeepAliveClient, session: string, tool: string, args: Record<string, unknown>) {
  return api.post(`/v1/sessions/${session}/tools/${tool}`, { arguments: args });
}

async function expectOk(pending: ReturnType<typeof toolCall>): Promise<void> {
  const res = await pending;
  if (res.status !== 200 || (JSON.parse(res.text) as { is_error?: boolean }).is_error) throw new Error(`tool call failed: ${res.status} ${res.text.slice(0, 300)}`);
}

async function expectChannelOk(pending: ReturnType<AgentChannel['call']>): Promise<void> {
  const result = await pending;
  if (result.is_error) throw new Error(`channel call failed: ${result.output.slice(0, 300)}`);
}

/**
 * Every process a call passes through: the gateway, the executor, this bench's NATS server,
 * the sessions' containers (agent and commands, by cgroup) and their containerd shims, and
 * Docker's daemons, which relay the channel's bytes and serve the whole host.
 */
function cpuSources(stack: BenchStack, containerIds: string[]): CpuSource[] {
  const nats = findProcesses((args, ppid) => ppid === process.pid && args[0].endsWith('nats-server'));
  const shims = findProcesses((args) => args[0].includes('containerd-shim') && containerIds.some((id) => args.includes(id)));
  const daemon = (name: string) => findProcesses((args) => args[0].endsWith(`/${name}`) || args[0] === name);
  return [
    { name: 'gateway', seconds: () => processSeconds(stack.gatewayPid) },
    { name: 'executor', seconds: () => processSeconds(stack.executorPid) },
    { name: 'nats-server', seconds: processesSeconds(nats) },
    { name: `sandbox containers (${containerIds.length})`, seconds: containersSeconds(containerIds) },
    { name: `containerd shims (${shims.length})`, seconds: processesSeconds(shims) },
    { name: 'dockerd', shared: true, seconds: processesSeconds(daemon('dockerd')) },
    { name: 'containerd', shared: true, seconds: processesSeconds(daemon('containerd')) },
    { name: BENCH_CLIENT, seconds: ownSeconds },
  ];
}

/** The session's container, from its sandbox row: one from the warm pool carries no session label. */
async function containerOf(stack: BenchStack, session: string): Promise<Docker.Container> {
  const client = new Client({ connectionString: stack.systemDatabaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ container_id: string | null }>('SELECT container_id FROM sandboxes WHERE session_id = $1', [session]);
    const id = rows[0]?.container_id;
    if (!id) throw new Error(`no container for session ${session}`);
    return docker.getContainer(id);
  } finally {
    await client.end();
  }
}

/** A channel of the bench's own into the container's agent, opened the way the executor opens its own. */
async function openChannel(container: Docker.Container): Promise<AgentChannel> {
  const exec = await container.exec({ Cmd: [...AGENT_COMMAND, 'attach'], User: AGENT_USER, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: true });
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  stderr.resume();
  stream.on('end', () => stdout.end());
  const channel = new AgentChannel(stream, stdout);
  await channel.ready(15_000);
  return channel;
}

function report(figures: Figure[]): void {
  const rows = figures.map((f) => {
    const p50 = percentile(f.samples, 50);
    const floor50 = percentile(f.floor, 50);
    return [f.name, String(f.samples.length), ms(p50), ms(percentile(f.samples, 99)), ms(floor50), ms(percentile(f.floor, 99)), (p50 / floor50).toFixed(2), f.target];
  });
  const header = ['through the API', 'n', 'p50', 'p99', 'floor p50', 'floor p99', 'p50/floor', 'target'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 || i === 7 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}`);
  console.log('(floor: the same op over a channel of the bench\'s own straight into the sandbox agent)');
}

function ms(value: number): string {
  return `${value.toFixed(2)} ms`;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`bench failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
