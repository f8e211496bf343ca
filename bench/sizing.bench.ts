/**
 * Executor sizing figures, printed, never asserted (run with `./runbox bench sizing`).
 *
 *   sandbox memory     working set (usage less page cache) of each live, idle session's
 *                      sandbox, after one `terminal` call made it ready
 *   sandbox idle cpu   CPU each of those sandboxes used over a quiet interval, in millicores
 *   plain container    the same figures for a plain `sleep infinity` container of the same
 *                      image: what a container costs before Runbox's agent runs in it
 *
 * From them, deploy/kubernetes/README.md "Sizing" derives sessions per GiB and per core.
 * It starts its own gateway and executor (the test stack) and removes every container,
 * volume, database and process it made.
 */
import Docker from 'dockerode';
import { cpus, loadavg } from 'node:os';
import { TestStack } from '../test/support/test-stack';
import { percentile } from './support/stats';

const SESSIONS = 20;
const IDLE_WINDOW_MS = 10_000;
const PLAIN_LABEL = 'runbox.bench.sizing';
const docker = new Docker();

interface Sample {
  memoryMiB: number;
  cpuNs: number;
}

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? 'runbox-sandbox:latest';
  process.stdout.write(`sizing bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}, image ${image}, ${SESSIONS} sessions\n`);
  const stack = await new TestStack().start();
  const plain: Docker.Container[] = [];
  try {
    const tenant = await stack.createTenant();
    const sessionIds: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
      const res = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
      if (res.status !== 200 || res.body.is_error) throw new Error(`terminal failed: ${res.status} ${res.text}`);
      sessionIds.push(session.body.id);
    }
    const sandboxes = await Promise.all(sessionIds.map(async (id) => {
      const [found] = await docker.listContainers({ filters: { label: [`runbox.session=${id}`] } });
      return docker.getContainer(found.Id);
    }));
    for (let i = 0; i < SESSIONS; i++) {
      const container = await docker.createContainer({
        Image: image, Cmd: ['sleep', 'infinity'], Labels: { [PLAIN_LABEL]: '1' },
        HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'] },
      });
      await container.start();
      plain.push(container);
    }
    const [runbox, bare] = await Promise.all([idleSamples(sandboxes), idleSamples(plain)]);
    report(runbox, bare);
  } finally {
    await Promise.all(plain.map((c) => c.remove({ force: true }).catch(() => undefined)));
    await stack.stop();
  }
}

/** Memory now, and CPU used over a quiet window, per container. */
async function idleSamples(containers: Docker.Container[]): Promise<Sample[]> {
  const before = await Promise.all(containers.map((c) => c.stats({ stream: false })));
  await new Promise((resolve) => setTimeout(resolve, IDLE_WINDOW_MS));
  const after = await Promise.all(containers.map((c) => c.stats({ stream: false })));
  return after.map((stats, i) => {
    const cache = (stats.memory_stats.stats as Record<string, number> | undefined)?.total_inactive_file
      ?? (stats.memory_stats.stats as Record<string, number> | undefined)?.inactive_file ?? 0;
    return {
      memoryMiB: (stats.memory_stats.usage - cache) / (1 << 20),
      cpuNs: stats.cpu_stats.cpu_usage.total_usage - before[i].cpu_stats.cpu_usage.total_usage,
    };
  });
}

function report(runbox: Sample[], bare: Sample[]): void {
  const millicores = (s: Sample) => (s.cpuNs / 1e6 / IDLE_WINDOW_MS) * 1000;
  const rows = [
    ['sandbox memory (MiB)', runbox.map((s) => s.memoryMiB)],
    ['plain container memory (MiB)', bare.map((s) => s.memoryMiB)],
    ['sandbox idle cpu (millicores)', runbox.map(millicores)],
    ['plain container idle cpu (millicores)', bare.map(millicores)],
  ] as const;
  const width = Math.max(...rows.map(([name]) => name.length));
  process.stdout.write(`\n${'measure'.padEnd(width)}     n      p50      p99\n`);
  for (const [name, values] of rows) {
    process.stdout.write(`${name.padEnd(width)}  ${String(values.length).padStart(4)}  ${percentile([...values], 50).toFixed(2).padStart(7)}  ${percentile([...values], 99).toFixed(2).padStart(7)}\n`);
  }
  const memP99 = percentile(runbox.map((s) => s.memoryMiB), 99);
  process.stdout.write(`\nsandbox / plain container memory (p50): ${(percentile(runbox.map((s) => s.memoryMiB), 50) / percentile(bare.map((s) => s.memoryMiB), 50)).toFixed(2)}\n`);
  process.stdout.write(`idle sessions per GiB of engine memory (by p99): ${Math.floor(1024 / memP99)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
