import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, stopProcess } from '@app/testing';

/** The built executor (`npx nest build executor`; `./runbox test` builds it). */
export const EXECUTOR_MAIN = join(__dirname, '..', '..', 'dist', 'apps', 'executor', 'apps', 'executor', 'src', 'main.js');

/**
 * An executor as production runs it: its own OS process from the build in dist/, so a test
 * can kill -9 it, or SIGTERM it and watch it drain, and start it again under the same id.
 */
export class ExecutorProcess {
  private child?: ChildProcess;
  private log = '';
  exited?: Promise<number | null>;

  constructor(
    readonly id: string,
    private readonly env: Record<string, string>,
  ) {}

  /** Starts it; ready once `isServing` (the gateway's view) says so. */
  async start(isServing: (id: string) => Promise<boolean>): Promise<void> {
    if (!existsSync(EXECUTOR_MAIN)) throw new Error(`${EXECUTOR_MAIN} is missing: run 'npx nest build executor' (./runbox test does)`);
    this.log = '';
    const env = { ...process.env, ...this.env, RUNBOX_EXECUTOR_ID: this.id, RUNBOX_LOG_LEVEL: process.env.RUNBOX_TEST_LOG_LEVEL ?? 'info' };
    const child = spawn(process.execPath, [EXECUTOR_MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => (this.log = (this.log + chunk.toString()).slice(-20_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    await eventually(`executor ${this.id} to announce itself`, async () => {
      if (child.exitCode !== null) throw new Error(`executor ${this.id} exited with ${child.exitCode}: ${this.log}`);
      return isServing(this.id);
    }, 60_000);
  }

  /** SIGKILL: a crash, nothing cleaned up. SIGTERM: a drain, then exit. Resolves once it exited. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (signal === 'SIGKILL') await stopProcess(child, 'SIGKILL');
    else child.kill(signal);
    await this.exited;
    this.child = undefined;
  }

  /** SIGSTOP: the process stalls as a starved or paused one does, its NATS connection still open. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  get output(): string {
    return this.log;
  }

  async stop(): Promise<void> {
    // A paused process would not see its SIGTERM until it is resumed.
    this.resume();
    if (this.child) await stopProcess(this.child);
    this.child = undefined;
  }
}
