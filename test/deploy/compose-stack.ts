import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const ROOT = join(__dirname, '..', '..');
const COMPOSE = join(ROOT, 'deploy', 'compose', 'compose.sh');

/** `./runbox images`: builds what is missing (nothing, when warm) and returns the tags it printed. */
export async function buildImages(): Promise<Record<string, string>> {
  const { stdout } = await run(join(ROOT, 'runbox'), ['images'], { cwd: ROOT, timeout: 20 * 60_000, maxBuffer: 1 << 20 });
  return Object.fromEntries(stdout.trim().split('\n').filter((l) => l.includes('=')).map((l) => l.split('=', 2) as [string, string]));
}

export async function docker(...args: string[]): Promise<string> {
  return (await run('docker', args, { timeout: 120_000, maxBuffer: 16 << 20 })).stdout.trim();
}

/**
 * One Compose project of deploy/compose/compose.yaml under a unique name, with its own .env
 * file, so it meets nothing else on the machine and `down -v` removes exactly what it made.
 */
export class ComposeProject {
  readonly name = `runbox-e2e-${randomBytes(4).toString('hex')}`;
  private readonly dir = mkdtempSync(join(tmpdir(), 'runbox-compose-'));
  private readonly envFile = join(this.dir, '.env');

  constructor(private env: Record<string, string>) {
    this.writeEnv();
  }

  /** Changes settings for the next `up` (a changed service is recreated). */
  setEnv(more: Record<string, string>): void {
    this.env = { ...this.env, ...more };
    this.writeEnv();
  }

  async compose(...args: string[]): Promise<string> {
    const { stdout } = await run(COMPOSE, ['-p', this.name, '--env-file', this.envFile, ...args], {
      cwd: ROOT, timeout: 10 * 60_000, maxBuffer: 16 << 20,
    });
    return stdout.trim();
  }

  /** The address of the project's network on this machine (its bridge): where containers reach the host. */
  async hostAddress(): Promise<string> {
    return docker('network', 'inspect', `${this.name}_default`, '--format', '{{(index .IPAM.Config 0).Gateway}}');
  }

  /** Each service's health as its image's HEALTHCHECK reports it; for a stopped one, its exit status. */
  async health(): Promise<Record<string, string>> {
    const ids = (await this.compose('ps', '-q')).split('\n').filter(Boolean);
    const lines = await Promise.all(ids.map((id) => docker('inspect', '--format',
      '{{index .Config.Labels "com.docker.compose.service"}} {{if and (eq .State.Status "running") .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}} {{.State.ExitCode}}{{end}}', id)));
    return Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)]));
  }

  /** What the machine's Docker engine still holds of this project, by Compose's labels. */
  async leftovers(): Promise<{ containers: string; volumes: string; networks: string }> {
    const filter = `label=com.docker.compose.project=${this.name}`;
    const [containers, volumes, networks] = await Promise.all([
      docker('ps', '-aq', '--filter', filter),
      docker('volume', 'ls', '-q', '--filter', filter),
      docker('network', 'ls', '-q', '--filter', filter),
    ]);
    return { containers, volumes, networks };
  }

  async down(): Promise<void> {
    await this.compose('down', '--volumes', '--remove-orphans', '--timeout', '20');
  }

  removeEnvFile(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private writeEnv(): void {
    writeFileSync(this.envFile, Object.entries(this.env).map(([k, v]) => `${k}=${v}\n`).join(''), { mode: 0o600 });
  }
}
