import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { stopProcess } from '@app/testing';

const DIST = join(__dirname, '..', '..', 'dist', 'apps');
/** The built services (`./runbox test` builds them), as production runs them. */
export const SERVICE_MAIN = {
  gateway: join(DIST, 'gateway', 'apps', 'gateway', 'src', 'main.js'),
  executor: join(DIST, 'executor', 'apps', 'executor', 'src', 'main.js'),
};

export type ServiceKind = keyof typeof SERVICE_MAIN;

/**
 * A gateway or executor as an OS process of its own, started from the build in dist/ with
 * the environment an operator would give it. It can be killed by pid (SIGKILL is a crash)
 * and started again with the same environment (for an executor: the same id). Its recent
 * output stays in memory for a failing test's message.
 */
export class ServiceProcess {
  private child?: ChildProcess;
  private log = '';
  /** Every pid this service ever had, so the suite can check nothing outlives it. */
  readonly pids: number[] = [];

  constructor(
    readonly kind: ServiceKind,
    readonly name: string,
    private readonly env: Record<string, string>,
    /** The gateway's base URL (to poll /healthz); executors report readiness in their log. */
    readonly url?: string,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  get output(): string {
    return this.log;
  }

  /** Starts the process and returns once it serves: the gateway answers /healthz, the executor logs that it listens. */
  async start(timeoutMs = 90_000): Promise<void> {
    const main = SERVICE_MAIN[this.kind];
    if (!existsSync(main)) throw new Error(`${main} is missing: run 'npm run build' (./runbox test does)`);
    this.log = '';
    const env = { ...process.env, ...this.env, RUNBOX_LOG_LEVEL: process.env.RUNBOX_TEST_LOG_LEVEL ?? 'info' };
    const child = spawn(process.execPath, [main], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => (this.log = (this.log + chunk.toString()).slice(-40_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
    if (child.pid) this.pids.push(child.pid);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited (${child.exitCode ?? child.signalCode}): ${this.log.slice(-4_000)}`);
      if (await this.serving()) return;
      if (Date.now() > deadline) throw new Error(`${this.name} did not start within ${timeoutMs} ms: ${this.log.slice(-4_000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Stops it: SIGKILL (the default) is a crash with no shutdown hooks; SIGTERM an orderly stop. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child) await stopProcess(this.child, signal);
    this.child = undefined;
  }

  private async serving(): Promise<boolean> {
    if (this.kind === 'executor') return this.log.includes('"msg":"executor listening"');
    return fetch(`${this.url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
  }
}
