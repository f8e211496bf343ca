/**
 * What the workspace disk limit costs, printed, never asserted (`npm run bench:disk`). Each
 * figure is measured twice in the same run, on two stacks that differ only in
 * RUNBOX_SANDBOX_DISK_MB: the default limit (an ext4 image on a loop device per workspace,
 * made and removed by a helper container), and 0 (a plain volume).
 *
 *   session ready     a new session's first `terminal true` through the HTTP API, no warm
 *                     pool: workspace + container create + start + attach + the command
 *   session delete    DELETE /v1/sessions/{id}: container, volume (and image) removed
 *   restart ready     the first call after the sandbox was idle-reaped: a new container on
 *                     the kept workspace (with the limit: its disk looked up again)
 *
 * It starts its own gateway and executors on a private database and NATS server (the test
 * stack) and removes every container, volume, disk image, database and process it made.
 */
import { eventually } from '@app/testing';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { TenantCredentials, TestStack } from '../test/support/test-stack';
import { percentile } from './support/stats';

const SAMPLES = 12;

interface Measured {
  ready: number[];
  restart: number[];
  remove: number[];
}

async function main(): Promise<void> {
  process.stdout.write(`workspace disk bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const limited = await measure('2048');
  const plain = await measure('0');
  const rows: Array<[string, number[], number[]]> = [
    ['session ready', limited.ready, plain.ready],
    ['restart ready (kept workspace)', limited.restart, plain.restart],
    ['session delete', limited.remove, plain.remove],
  ];
  const header = ['measure', 'n', 'limit p50', 'limit p99', 'plain p50', 'plain p99', 'p50 ratio'];
  const cells = rows.map(([name, withLimit, without]) => [
    name,
    String(withLimit.length),
    ms(percentile(withLimit, 50)),
    ms(percentile(withLimit, 99)),
    ms(percentile(without, 50)),
    ms(percentile(without, 99)),
    (percentile(withLimit, 50) / percentile(without, 50)).toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
  const line = (row: string[]) => row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${cells.map(line).join('\n')}\n`);
}

async function measure(diskMb: string): Promise<Measured> {
  const stack = await new TestStack({
    env: { RUNBOX_SANDBOX_DISK_MB: diskMb, RUNBOX_WARM_POOL_SIZE: '0', RUNBOX_SANDBOX_IDLE_TTL_SECONDS: '1' },
  }).start();
  const measured: Measured = { ready: [], restart: [], remove: [] };
  try {
    const tenant = await stack.createTenant();
    for (let i = 0; i < SAMPLES + 1; i++) {
      const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
      const ready = await timed(() => terminal(stack, tenant, id));
      await eventually('the idle reaper', async () => (await stack.request('GET', `/v1/sessions/${id}`, { key: tenant.apiKey })).body.sandbox.state === 'stopped', 60_000, 20);
      const restart = await timed(() => terminal(stack, tenant, id));
      const remove = await timed(async () => {
        const res = await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey });
        if (res.status !== 204) throw new Error(`delete failed: ${res.status} ${res.text}`);
      });
      // The first round warms caches and connections.
      if (i === 0) continue;
      measured.ready.push(ready);
      measured.restart.push(restart);
      measured.remove.push(remove);
    }
  } finally {
    await stack.stop();
  }
  return measured;
}

async function timed(work: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function terminal(stack: TestStack, tenant: TenantCredentials, sessionId: string): Promise<void> {
  const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
  if (res.status !== 200 || res.body.is_error || res.body.metadata.exit_code !== 0) throw new Error(`terminal failed: ${res.status} ${res.text}`);
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
