/**
 * File tools benchmark: `npm run bench:files`. Prints figures; asserts nothing.
 *
 *  1. read_file of a 4 KB and of an 8 MB file through POST /v1/sessions/{id}/tools/read_file
 *     (HTTP → gateway → NATS → executor → the agent's open channel), next to the same read
 *     done by one plain Docker API exec (create + start + read the stream + inspect).
 *  2. grep over a generated tree of 50,000 files (about 500 MB) through
 *     POST .../tools/grep, next to `rg` run directly in the same container.
 *
 * It starts its own stack (a fresh database, a private NATS server, the gateway and the
 * executor as processes of their own, one sandbox) and removes all of it at the end, the
 * 500 MB workspace volume included. Postgres, nats-server and Docker must be available,
 * as for `./runbox test`.
 */
import Docker from 'dockerode';
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { BenchStack, BenchTenant } from './support/bench-stack';

const ROOT = join(__dirname, '..');
const READ_CAP = 400 * 1024;

const ITERATIONS = {
  warmup: 20,
  read4k: 200,
  read8m: 30,
  exec4k: 100,
  exec8m: 30,
  grep: 9,
};
const TREE = { dirs: 500, filesPerDir: 100, fileBytes: 10_240, needleEvery: 1000 };

const docker = new Docker();

async function main(): Promise<void> {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const stack = new BenchStack({ RUNBOX_SANDBOX_IMAGE: image });
  const started = Date.now();
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    console.log('\ninterrupted: cleaning up');
    void stack.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  try {
    await stack.start();
    const tenant = await stack.createTenant('bench');
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
    const bench = new FileBench(stack, tenant, session);
    await bench.prepare();
    const load = loadavg().map((l) => l.toFixed(1)).join(' ');
    console.log(`runbox file tools benchmark (image ${image}, ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);
    await bench.reads();
    await bench.grep();
    console.log(`\ntotal ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    if (!interrupted) await stack.stop();
  }
}

class FileBench {
  private containerId = '';

  constructor(
    private readonly stack: BenchStack,
    private readonly tenant: BenchTenant,
    private readonly session: string,
  ) {}

  tool(name: string, args: Record<string, unknown>) {
    return this.stack.request('POST', `/v1/sessions/${this.session}/tools/${name}`, { key: this.tenant.apiKey, body: { arguments: args } });
  }

  async sh(command: string): Promise<string> {
    const res = await this.tool('terminal', { command, timeout_seconds: 900, max_wait_ms: 600_000 });
    if (res.status !== 200 || !/^exit_code: 0$/m.test(res.body?.output ?? '')) throw new Error(`command failed: ${command}\n${res.text}`);
    return res.body.output as string;
  }

  /** Makes the sandbox and the two files to read. */
  async prepare(): Promise<void> {
    await this.sh(`mkdir -p bench && python3 -c "
line = ('%s\\n' % ('x' * 99)).encode()
open('bench/4k.txt', 'wb').write(line * 40 + b'y' * 95 + b'\\n')
with open('bench/8m.txt', 'wb') as f:
    for i in range(83886):
        f.write(('%08d ' % i).encode() + line[9:])
    f.write(b'z' * 7 + b'\\n')
"`);
    const sizes = await this.sh('stat -c %s bench/4k.txt bench/8m.txt');
    const [small, big] = sizes.match(/^\d+$/gm)!.map(Number);
    if (small !== 4096 || big !== 8 * 1024 * 1024) throw new Error(`unexpected sizes ${small} ${big}`);
    const [container] = await docker.listContainers({ filters: { label: [`runbox.session=${this.session}`] } });
    this.containerId = container.Id;
  }

  async reads(): Promise<void> {
    const cases = [
      { label: '4 KB', path: 'bench/4k.txt', tool: ITERATIONS.read4k, exec: ITERATIONS.exec4k },
      { label: '8 MB', path: 'bench/8m.txt', tool: ITERATIONS.read8m, exec: ITERATIONS.exec8m },
    ];
    console.log('read_file through POST /v1/sessions/{id}/tools/read_file vs one plain Docker API exec');
    console.log('  (the exec runs `head -c 409600 <file>`: the bytes read_file reads; for the 8 MB file read_file');
    console.log('   reads the first 400 KB, its cap, and returns the lines that fit the 30,000-character output budget)');
    for (const c of cases) {
      let sample = '';
      for (let i = 0; i < ITERATIONS.warmup; i++) sample = (await this.readOnce(c.path)).output;
      const viaTool = await measure(c.tool, () => this.readOnce(c.path));
      const viaExec = await measure(c.exec, () => this.execOnce(['head', '-c', String(READ_CAP), `/workspace/${c.path}`]));
      console.log(
        `  ${c.label}: tool p50 ${ms(viaTool.p50)} p99 ${ms(viaTool.p99)} (n=${c.tool}, ${sample.length} chars returned)` +
          ` | plain exec p50 ${ms(viaExec.p50)} p99 ${ms(viaExec.p99)} (n=${c.exec}) | tool/exec p50 ${(viaTool.p50 / viaExec.p50).toFixed(3)}`,
      );
      if (c.label === '4 KB') {
        console.log(`    target: p50 ≤ 10 ms and ≤ 1/4 of the plain exec → ${verdict(viaTool.p50 <= 10 && viaTool.p50 <= viaExec.p50 / 4)}`);
      } else {
        console.log(`    target: p50 ≤ 150 ms → ${verdict(viaTool.p50 <= 150)}; header: ${sample.slice(0, sample.indexOf('\n'))}`);
      }
    }
  }

  private async readOnce(path: string): Promise<{ output: string }> {
    const res = await this.tool('read_file', { path });
    if (res.status !== 200 || res.body.is_error) throw new Error(`read_file failed: ${res.text.slice(0, 300)}`);
    return res.body;
  }

  /** One plain exec as a client without a channel would do it: create, start, drain, inspect. */
  private async execOnce(cmd: string[]): Promise<string> {
    const exec = await docker.getContainer(this.containerId).exec({ Cmd: cmd, User: '1000:1000', AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    const stdout = new PassThrough();
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    docker.modem.demuxStream(stream, stdout, new PassThrough().resume());
    await new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    const info = await exec.inspect();
    if (info.ExitCode !== 0) throw new Error(`${cmd.join(' ')} exited ${info.ExitCode}`);
    return Buffer.concat(chunks).toString('utf8');
  }

  async grep(): Promise<void> {
    const total = TREE.dirs * TREE.filesPerDir;
    const t0 = Date.now();
    // One command inside the container writes the whole tree: 50,000 files via the API would
    // measure the API, not grep.
    await this.sh(`python3 -c "
import os
body_line = 'the quick brown fox jumps over the lazy dog while the build runs tests again %06d\\n'
for d in range(${TREE.dirs}):
    folder = 'tree/pkg%03d' % d
    os.makedirs(folder, exist_ok=True)
    for f in range(${TREE.filesPerDir}):
        n = d * ${TREE.filesPerDir} + f
        lines, size = [], 0
        while size < ${TREE.fileBytes}:
            line = body_line % (size + n)
            lines.append(line)
            size += len(line)
        if n % ${TREE.needleEvery} == 0:
            lines[len(lines) // 2] = 'NEEDLE_BENCH found in file %d\\n' % n
        with open('%s/file%03d.txt' % (folder, f), 'w') as out:
            out.write(''.join(lines)[:${TREE.fileBytes}])
"`);
    const du = (await this.sh('du -sm tree | cut -f1')).match(/^(\d+)$/m)?.[1];
    const expected = Math.ceil(total / TREE.needleEvery);
    console.log(`\ngrep over ${total.toLocaleString('en')} files (${du} MB, written in ${((Date.now() - t0) / 1000).toFixed(0)} s), pattern NEEDLE_BENCH (${expected} files match)`);

    const plainRg = 'rg -l NEEDLE_BENCH tree';
    // The command the grep tool runs (deploy/sandbox/agent/runbox_tools/search.py, RgRun.command):
    // the same search plus the 8 MB size limit, hidden files, .git excluded, JSON out.
    const limitRg = 'rg -l --max-filesize 8M NEEDLE_BENCH tree';
    const toolRg = 'rg --json --debug --no-config --hidden --binary --max-filesize 8M --case-sensitive --glob !.git --regexp NEEDLE_BENCH -- tree';
    // Timed inside the container, so without the exec's own cost: wall time, and the CPU time
    // the container's cgroup spent, which other load on the host barely changes.
    const timed = (command: string) =>
      `cd /workspace && c=$(${CGROUP_CPU_NS}) && s=$(date +%s%N) && ${command} > /tmp/rg.out 2>/dev/null; e=$(date +%s%N); ` +
      `echo "$(grep -c '"type":"begin"' /tmp/rg.out || true) $(wc -l < /tmp/rg.out) $(( (e - s) / 1000 )) $(( ($(${CGROUP_CPU_NS}) - c) / 1000 ))"`;
    const inContainer = async (command: string) => {
      const [begins, lines, wallMicros, cpuMicros] = (await this.execOnce(['sh', '-c', timed(command)])).trim().split(' ').map(Number);
      return { begins, lines, wall: wallMicros / 1000, cpu: cpuMicros / 1000 };
    };
    const cpuNow = async () => Number((await this.execOnce(['sh', '-c', CGROUP_CPU_NS])).trim());
    // Warm the page cache once, so every run below reads from memory alike.
    await inContainer(plainRg);

    const samples = { tool: [] as number[], toolCpu: [] as number[], plain: [] as number[], plainCpu: [] as number[], exec: [] as number[], flags: [] as number[], flagsCpu: [] as number[], limit: [] as number[], limitCpu: [] as number[] };
    for (let i = 0; i < ITERATIONS.grep; i++) {
      const cpuBefore = await cpuNow();
      const t = performance.now();
      const res = await this.tool('grep', { pattern: 'NEEDLE_BENCH', path: 'tree' });
      samples.tool.push(performance.now() - t);
      samples.toolCpu.push((await cpuNow()) / 1e6 - cpuBefore / 1e6);
      if (res.status !== 200 || res.body.is_error || res.body.metadata.files_matched !== expected) {
        throw new Error(`grep tool: unexpected result ${res.text.slice(0, 300)}`);
      }
      const e = performance.now();
      const plain = await inContainer(plainRg);
      samples.exec.push(performance.now() - e);
      samples.plain.push(plain.wall);
      samples.plainCpu.push(plain.cpu);
      if (plain.lines !== expected) throw new Error(`rg found ${plain.lines} files, expected ${expected}`);
      const limited = await inContainer(limitRg);
      samples.limit.push(limited.wall);
      samples.limitCpu.push(limited.cpu);
      const flags = await inContainer(toolRg);
      samples.flags.push(flags.wall);
      samples.flagsCpu.push(flags.cpu);
      if (flags.begins !== expected) throw new Error(`rg with the tool's flags found ${flags.begins} files, expected ${expected}`);
    }
    const p50 = (xs: number[]) => percentiles(xs).p50;
    const row = (label: string, wall: number[], cpu?: number[]) =>
      console.log(`  ${label.padEnd(56)} wall p50 ${ms(p50(wall)).padStart(9)}${cpu ? `   container CPU p50 ${ms(p50(cpu)).padStart(9)}` : ''}`);
    row(`grep tool via HTTP (n=${ITERATIONS.grep})`, samples.tool, samples.toolCpu);
    row(`\`${plainRg}\` in the container`, samples.plain, samples.plainCpu);
    row('the same rg, timed around one docker exec', samples.exec);
    row(`\`${limitRg}\``, samples.limit, samples.limitCpu);
    row("rg with the tool's flags in the container", samples.flags, samples.flagsCpu);
    const ratio = p50(samples.tool) / p50(samples.plain);
    console.log(
      `  grep tool / plain rg: ${ratio.toFixed(2)}x wall, ${(p50(samples.toolCpu) / p50(samples.plainCpu)).toFixed(2)}x CPU;` +
        ` / rg via docker exec: ${(p50(samples.tool) / p50(samples.exec)).toFixed(2)}x wall`,
    );
    console.log(
      `  grep tool / rg with the tool's flags: ${(p50(samples.tool) / p50(samples.flags)).toFixed(2)}x wall, ` +
        `${(p50(samples.toolCpu) / p50(samples.flagsCpu)).toFixed(2)}x CPU (what the API, NATS, executor and agent add)`,
    );
    console.log(
      `  the 8 MB size limit alone costs rg ${(p50(samples.limitCpu) / p50(samples.plainCpu)).toFixed(2)}x CPU (one stat per file)`,
    );
    console.log(`    target: within 1.3x of plain rg → ${verdict(ratio <= 1.3)} (wall)`);
  }
}

/** Nanoseconds of CPU the container's cgroup has used (cgroup v1, else v2). */
const CGROUP_CPU_NS = "cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null || awk '/^usage_usec/ { printf \"%s000\\n\", $2 }' /sys/fs/cgroup/cpu.stat";

interface Stats {
  p50: number;
  p99: number;
  min: number;
}

async function measure(n: number, work: () => Promise<unknown>): Promise<Stats> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await work();
    times.push(performance.now() - t);
  }
  return percentiles(times);
}

function percentiles(times: number[]): Stats {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: at(0.5), p99: at(0.99), min: sorted[0] };
}

const ms = (v: number) => `${v.toFixed(v < 10 ? 2 : 1)} ms`;
const verdict = (met: boolean) => (met ? 'met' : 'MISSED');

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
