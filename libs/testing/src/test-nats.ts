import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real nats-server with JetStream, private to one test file: its own port and storage, so
 * queues, consumers and executors of concurrent test files never meet.
 */
export interface TestNats {
  url: string;
  /** The server's process id (a bench reads its CPU time). */
  pid?: number;
  /** Its HTTP monitoring endpoint (`/varz`), when asked for with `monitor`. */
  monitorUrl?: string;
  stop(): Promise<void>;
}

export interface TestNatsOptions {
  /** The server's max_payload in bytes (nats-server's default is 1 MiB). */
  maxPayload?: number;
  /** Serve nats-server's monitoring endpoint on a loopback port (message counts for benches). */
  monitor?: boolean;
}

export async function startNats(options: TestNatsOptions = {}): Promise<TestNats> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'runbox-nats-'));
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
  if (options.maxPayload !== undefined) {
    // max_payload has no command-line flag: it goes in a config file.
    writeFileSync(join(dir, 'nats.conf'), `max_payload: ${options.maxPayload}\n`);
    args.push('-c', join(dir, 'nats.conf'));
  }
  const monitorPort = options.monitor ? await freePort() : undefined;
  if (monitorPort !== undefined) args.push('-m', String(monitorPort));
  const proc = spawn('nats-server', args, { stdio: 'ignore' });
  await waitForPort(port, proc);
  return {
    url: `nats://127.0.0.1:${port}`,
    pid: proc.pid,
    monitorUrl: monitorPort === undefined ? undefined : `http://127.0.0.1:${monitorPort}`,
    stop: async () => {
      await stopProcess(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Ports handed to servers a test starts are drawn below the kernel's ephemeral range
 * (32768 and up here): a port the kernel picked for `listen(0)` and that was then released
 * can be taken at once by any outgoing connection on the machine (a database pool, a Docker
 * call), and the server started on it a moment later fails to bind. Below that range only
 * another test's pick can collide, and only by drawing the same one of 17,000 ports within
 * the same few milliseconds.
 */
const TEST_PORTS = { from: 15_000, to: 32_000 };

/** A loopback port nothing listens on now, outside the ephemeral range. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = TEST_PORTS.from + Math.floor(Math.random() * (TEST_PORTS.to - TEST_PORTS.from));
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port between ${TEST_PORTS.from} and ${TEST_PORTS.to}`);
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function waitForPort(port: number, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}`);
    if (await canConnect(port)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('nats-server did not start');
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

export function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill(signal);
  });
}
