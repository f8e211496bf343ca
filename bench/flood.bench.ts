/**
 * Another session's latency while one sandbox floods its channel, printed, never asserted
 * (run with `npm run bench:flood`).
 *
 *   quiet     `terminal true` through the HTTP API on session B, nothing else running
 *   flooded   the same on session B while session A's channel keeps receiving 40 MB with
 *             no newline (written into its relay's stdout by the engine's root, which is
 *             what a broken relay or agent would send; no tool process can write there).
 *             Each flood gets A's sandbox stopped; A's next call starts a new one, and the
 *             flood starts again, until B's samples are taken.
 *
 * Also printed: the executor's event-loop delay in each phase (the executor runs in this
 * process), which tells the executor's own share of a slowdown from the host's (the flood
 * and the flooder's restarts also cost dockerd and the CPU), how many floods ran, and the
 * executor's peak RSS growth during them. It starts its own gateway and executor (the
 * test stack) and removes all it made.
 */
import Docker from 'dockerode';
import { cpus, loadavg } from 'node:os';
import { IntervalHistogram, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { TenantCredentials, TestStack } from '../test/support/test-stack';
import { percentile } from './support/stats';

const SAMPLES = 300;
const WARM_UP = 20;
const FLOOD_BYTES = 40 * 1024 * 1024;

const docker = new Docker();

async function main(): Promise<void> {
  process.stdout.write(`flood bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const stack = await new TestStack({ env: { RUNBOX_WARM_POOL_SIZE: '0' } }).start();
  try {
    const tenant = await stack.createTenant();
    const measured = await newSession(stack, tenant);
    const flooder = await newSession(stack, tenant);
    for (let i = 0; i < WARM_UP; i++) await terminal(stack, tenant, measured);
    const quietLoop = monitorEventLoopDelay({ resolution: 5 });
    quietLoop.enable();
    const quiet = await roundTrips(stack, tenant, measured);
    quietLoop.disable();

    let stop = false;
    let floods = 0;
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 20);
    const flooding = (async () => {
      while (!stop) {
        await terminal(stack, tenant, flooder);
        const [container] = await docker.listContainers({ filters: { label: [`runbox.session=${flooder}`] } });
        await floodChannel(container.Id);
        floods++;
      }
    })();
    const floodedLoop = monitorEventLoopDelay({ resolution: 5 });
    floodedLoop.enable();
    const flooded = await roundTrips(stack, tenant, measured);
    floodedLoop.disable();
    stop = true;
    await flooding;
    clearInterval(sampler);

    const row = (name: string, s: number[]) => `${name.padEnd(28)} ${String(s.length).padStart(4)}  ${ms(percentile(s, 50))}  ${ms(percentile(s, 99))}`;
    process.stdout.write(`\n${'measure'.padEnd(28)} ${'n'.padStart(4)}  ${'p50'.padStart(9)}  ${'p99'.padStart(9)}\n`);
    process.stdout.write(`${row('terminal `true`, quiet', quiet)}\n${row('terminal `true`, flooded', flooded)}\n`);
    process.stdout.write(
      `\nflooded / quiet: p50 ${(percentile(flooded, 50) / percentile(quiet, 50)).toFixed(2)}, p99 ${(percentile(flooded, 99) / percentile(quiet, 99)).toFixed(2)}` +
        `  (target: flooded p99 < 100 ms)\n` +
        `executor event-loop delay p99: quiet ${loopMs(quietLoop)}, flooded ${loopMs(floodedLoop)}\n` +
        `floods of ${FLOOD_BYTES / 1024 / 1024} MB: ${floods}, each ending with the flooder's sandbox stopped; executor RSS peak growth ${((rssPeak - rssBefore) / 1024 / 1024).toFixed(1)} MB\n`,
    );
  } finally {
    await stack.stop();
  }
}

async function newSession(stack: TestStack, tenant: TenantCredentials): Promise<string> {
  const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
  await terminal(stack, tenant, id);
  return id;
}

async function roundTrips(stack: TestStack, tenant: TenantCredentials, sessionId: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    await terminal(stack, tenant, sessionId);
    times.push(performance.now() - started);
  }
  return times;
}

async function terminal(stack: TestStack, tenant: TenantCredentials, sessionId: string): Promise<void> {
  const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
  if (res.status !== 200 || res.body.is_error) throw new Error(`terminal failed: ${res.status} ${res.text}`);
}

/** Writes the flood into the relay's stdout as the container's root; ends when the container goes. */
async function floodChannel(containerId: string): Promise<void> {
  const relay = "$(pgrep -f '^runbox-attach')";
  const exec = await docker.getContainer(containerId).exec({
    Cmd: ['sh', '-c', `head -c ${FLOOD_BYTES} /dev/zero | tr '\\0' A > /proc/${relay}/fd/1`],
    User: '0:0',
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  await new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
    stream.resume();
  });
  // The exec may end a moment before the executor has removed the container.
  for (;;) {
    try {
      await docker.getContainer(containerId).inspect();
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The histogram's p99 beyond the sampling interval itself, in ms. */
function loopMs(histogram: IntervalHistogram): string {
  return `${Math.max(0, histogram.percentile(99) / 1e6 - 5).toFixed(1)} ms`;
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`.padStart(9);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
