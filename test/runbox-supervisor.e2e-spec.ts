import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './support/runs';

const SUPERVISE = join(__dirname, '..', 'scripts', 'supervise.sh');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The part of `./runbox up` that keeps a service running: a service killed with -9 comes
 * back, with a log line saying how it ended, and stopping the supervisor stops the service.
 */
describe('./runbox up: the service supervisor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runbox-supervise-'));
  const pidFile = join(dir, 'service.pid');
  let supervisor: ChildProcess;
  let log = '';
  const started: number[] = [];

  beforeAll(() => {
    supervisor = spawn(SUPERVISE, ['sleeper', pidFile, 'sleep', '600'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUNBOX_STATE_DIR: dir } });
    supervisor.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    supervisor.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  });

  afterAll(() => {
    // Whatever the test left running, by pid.
    for (const pid of [supervisor.pid, ...started]) if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('restarts a service killed with -9, says why, and stops it when stopped itself', async () => {
    const first = await eventually('the service to start', async () => readPid(pidFile), 10_000);
    started.push(first);
    process.kill(first, 'SIGKILL');

    const second = await eventually('the service to be restarted', async () => {
      const pid = readPid(pidFile);
      return pid !== undefined && pid !== first && alive(pid) ? pid : undefined;
    }, 10_000);
    started.push(second);
    expect(alive(first)).toBe(false);
    expect(log).toMatch(new RegExp(`sleeper \\(pid ${first}\\) was killed by signal KILL after \\d+s; restarting it in 1s`));

    const exited = new Promise<number | null>((resolve) => supervisor.once('exit', (code) => resolve(code)));
    supervisor.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(alive(second)).toBe(false);
    expect(readPid(pidFile)).toBeUndefined();
  });

  it('stops without a restart when the service ends by INT, as Ctrl-C ends it', async () => {
    const intFile = join(dir, 'int-service.pid');
    const readyFile = join(dir, 'int-service.ready');
    let intLog = '';
    // Node, like the real services: it dies by INT even where its parent ignores INT, once
    // it has set its signals up at startup. Until then the INT its parent ignores is lost,
    // so the service says when its own code runs.
    const serviceCode = `require('fs').writeFileSync(${JSON.stringify(readyFile)}, String(process.pid)); setInterval(() => undefined, 1000)`;
    const other = spawn(SUPERVISE, ['node-service', intFile, process.execPath, '-e', serviceCode], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RUNBOX_STATE_DIR: dir },
    });
    other.stderr?.on('data', (chunk: Buffer) => (intLog += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => other.once('exit', (code) => resolve(code)));
    const service = await eventually('the service to start', async () => readPid(intFile), 10_000);
    started.push(service, other.pid!);
    await eventually('the service to run its code', async () => readPid(readyFile) === service || undefined, 10_000);
    process.kill(service, 'SIGINT');
    const stillRunning = new Promise<string>((resolve) => setTimeout(() => resolve('the supervisor is still running'), 10_000).unref());
    expect(await Promise.race([exited, stillRunning])).toBe(0);
    expect(intLog).toMatch(new RegExp(`node-service \\(pid ${service}\\) was stopped by INT \\(Ctrl-C\\) after \\d+s; not restarting it`));
    expect(intLog).not.toContain('restarting it in');
    expect(readPid(intFile)).toBeUndefined();
  });
});
