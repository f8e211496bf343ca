/**
 * Files API benchmark: `npm run bench:files-api`. Prints figures; asserts nothing.
 *
 * A 32 MiB random file up (PUT /v1/sessions/{id}/files/...) and down (GET) through the whole
 * path (HTTP → gateway → pulled NATS byte stream → executor → Docker's archive API), next to
 * `docker cp` of the same file into and out of the same container, in the same run. Also
 * the peak resident memory of the gateway and the executor processes over the transfers, to
 * show that neither holds the file.
 *
 * It starts its own stack (a fresh database, a private NATS server, gateway and executor as
 * processes of their own, one sandbox) and removes all of it at the end.
 */
import Docker from 'dockerode';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchStack } from './support/bench-stack';
import { percentile, timeIt } from './support/stats';

const ROOT = join(__dirname, '..');
const FILE_BYTES = 32 * 1024 * 1024;
const RUNS = 5;

const docker = new Docker();

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image });
  const dir = mkdtempSync(join(tmpdir(), 'runbox-files-api-bench-'));
  try {
    await stack.start();
    const tenant = await stack.createTenant('bench');
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
    const auth = { authorization: `Bearer ${tenant.apiKey}` };
    const fileUrl = `${stack.url}/v1/sessions/${session}/files/bench/blob.bin`;
    // The first call makes the sandbox; it is not measured.
    const warm = await fetch(`${stack.url}/v1/sessions/${session}/files/bench/warm.txt`, { method: 'PUT', headers: auth, body: 'warm' });
    if (warm.status !== 200) throw new Error(`warm-up upload failed: ${warm.status} ${await warm.text()}`);
    const [container] = await docker.listContainers({ filters: { label: [`runbox.session=${session}`] } });

    const data = randomBytes(FILE_BYTES);
    const sum = createHash('sha256').update(data).digest('hex');
    const local = join(dir, 'blob.bin');
    writeFileSync(local, data);
    const load = loadavg().map((l) => l.toFixed(1)).join(' ');
    console.log(`runbox files API benchmark (image ${image}, ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})`);
    console.log(`${FILE_BYTES / 1024 / 1024} MiB random file, ${RUNS} runs each\n`);

    const rssBefore = { gateway: peakRssMb(stack.gatewayPid), executor: peakRssMb(stack.executorPid) };
    const up = await timeIt(RUNS, async () => {
      const res = await fetch(fileUrl, { method: 'PUT', headers: auth, body: data });
      const body = (await res.json()) as { sha256?: string };
      if (res.status !== 200 || body.sha256 !== sum) throw new Error(`upload failed: ${res.status} ${JSON.stringify(body)}`);
    });
    const down = await timeIt(RUNS, async () => {
      const res = await fetch(fileUrl, { headers: auth });
      if (res.status !== 200 || !res.body) throw new Error(`download failed: ${res.status}`);
      const hash = createHash('sha256');
      for await (const chunk of res.body) hash.update(chunk);
      if (hash.digest('hex') !== sum) throw new Error('download returned other bytes');
    });
    const rssAfter = { gateway: peakRssMb(stack.gatewayPid), executor: peakRssMb(stack.executorPid) };

    const target = `${container.Id}:/workspace/bench/cp.bin`;
    const cpIn = await timeIt(RUNS, async () => execFileSync('docker', ['cp', local, target]));
    const back = join(dir, 'back.bin');
    const cpOut = await timeIt(RUNS, async () => {
      rmSync(back, { force: true });
      execFileSync('docker', ['cp', target, back]);
    });
    if (createHash('sha256').update(readFileSync(back)).digest('hex') !== sum) throw new Error('docker cp returned other bytes');

    report('up   (PUT)   ', up, 'docker cp in ', cpIn);
    report('down (GET)   ', down, 'docker cp out', cpOut);
    console.log(
      `\npeak RSS (VmHWM) before → after the transfers: gateway ${rssBefore.gateway} → ${rssAfter.gateway} MiB, ` +
        `executor ${rssBefore.executor} → ${rssAfter.executor} MiB (the file is ${FILE_BYTES / 1024 / 1024} MiB; the benchmark process itself holds it)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await stack.stop();
  }
}

function report(label: string, samples: number[], plainLabel: string, plain: number[]): void {
  const mbps = (ms: number) => (FILE_BYTES / 1024 / 1024 / (ms / 1000)).toFixed(0);
  const p50 = percentile(samples, 50);
  const plain50 = percentile(plain, 50);
  console.log(
    `${label} p50 ${p50.toFixed(0)} ms (${mbps(p50)} MiB/s), p99 ${percentile(samples, 99).toFixed(0)} ms (${mbps(percentile(samples, 99))} MiB/s)` +
      ` | ${plainLabel} p50 ${plain50.toFixed(0)} ms (${mbps(plain50)} MiB/s), p99 ${percentile(plain, 99).toFixed(0)} ms` +
      ` | ratio ${(p50 / plain50).toFixed(2)}x docker cp`,
  );
}

/** The process's peak resident set so far, in MiB (Linux /proc). */
function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmHWM:\s+(\d+) kB/m);
  return line ? Math.round(Number(line[1]) / 1024) : -1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
