import Docker from 'dockerode';
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stopProcess } from '@app/testing';

const run = promisify(execFile);

/**
 * A Docker engine of its own on this machine: a second `dockerd` with its own data root,
 * exec root, socket and pidfile, which Runbox cannot tell from another node's engine.
 *
 * It gets a bridge of its own, made here, rather than `--bridge none`: a dockerd started
 * with `--bridge none` deletes the host's `docker0` interface (moby's
 * removeDefaultBridgeInterface), which breaks the host engine's bridged containers. It
 * writes no iptables rules and turns on no forwarding (sandboxes run with no network).
 * `stop()` removes everything it made: containers, volumes, its bridge and its folder.
 */
export class DockerEngine {
  private constructor(
    readonly dir: string,
    private readonly bridge: string,
    private readonly daemon: ChildProcess,
    private log: string,
  ) {}

  /** `unix://…/docker.sock`: what DOCKER_HOST is set to for an executor on this engine. */
  get host(): string {
    return `unix://${join(this.dir, 'docker.sock')}`;
  }

  get client(): Docker {
    return new Docker({ socketPath: join(this.dir, 'docker.sock') });
  }

  /** Starts one and waits until it answers (a short path: a socket path has a length limit). */
  static async start(): Promise<DockerEngine> {
    const dir = mkdtempSync('/tmp/rbe-');
    const bridge = await makeBridge();
    const args = [
      ...['--data-root', join(dir, 'data'), '--exec-root', join(dir, 'exec'), '-H', `unix://${join(dir, 'docker.sock')}`, '--pidfile', join(dir, 'docker.pid')],
      ...['--bridge', bridge, '--iptables=false', '--ip-masq=false', '--ip-forward=false'],
    ];
    const daemon = spawn('dockerd', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const engine = new DockerEngine(dir, bridge, daemon, '');
    const keep = (chunk: Buffer) => (engine.log = (engine.log + chunk.toString()).slice(-10_000));
    daemon.stdout?.on('data', keep);
    daemon.stderr?.on('data', keep);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (daemon.exitCode !== null) throw new Error(`dockerd exited with ${daemon.exitCode}: ${engine.log}`);
      if (await engine.client.ping().then(() => true, () => false)) return engine;
      if (Date.now() > deadline) {
        await engine.stop();
        throw new Error(`dockerd did not answer within 60 s: ${engine.log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Copies images from the host's engine into this one (`docker save | docker load`),
   * skipping it when this engine already has the same image id.
   */
  async loadImage(tag: string): Promise<void> {
    const { Id } = await new Docker().getImage(tag).inspect();
    const present = await this.client.getImage(tag).inspect().then((i) => i.Id === Id, () => false);
    if (present) return;
    await run('sh', ['-c', `docker save "$1" | docker -H "$2" load -q`, 'sh', tag, this.host], { maxBuffer: 1024 * 1024 });
  }

  /** Removes its containers and volumes, stops the daemon and deletes its folder. */
  async stop(): Promise<void> {
    const docker = this.client;
    if (this.daemon.exitCode === null) {
      const containers = await docker.listContainers({ all: true }).catch(() => []);
      await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
      const volumes = await docker.listVolumes().then((v) => v.Volumes ?? [], () => []);
      await Promise.all(volumes.map((v) => docker.getVolume(v.Name).remove({ force: true }).catch(() => undefined)));
    }
    await stopProcess(this.daemon, 'SIGTERM');
    // Mounts the daemon left behind (a crash) would keep the folder from being deleted.
    await run('sh', ['-c', `grep -o " ${this.dir}/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l`]).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
    await run('ip', ['link', 'del', this.bridge]).catch(() => undefined);
  }
}

/**
 * A bridge interface for one engine, on a /24 of 10.250.0.0/16 that no interface of this
 * host uses yet (the engine takes its address as its default network's gateway).
 */
async function makeBridge(): Promise<string> {
  const name = `rbe${randomBytes(5).toString('hex')}`; // interface names are at most 15 characters
  const { stdout } = await run('ip', ['-4', '-o', 'addr', 'show']);
  const used = new Set([...stdout.matchAll(/inet 10\.250\.(\d+)\./g)].map((m) => Number(m[1])));
  const free = Array.from({ length: 254 }, (_, i) => i + 1).filter((n) => !used.has(n));
  if (free.length === 0) throw new Error('no free /24 in 10.250.0.0/16 for a test engine bridge');
  const subnet = free[randomBytes(1)[0] % free.length];
  await run('ip', ['link', 'add', 'name', name, 'type', 'bridge']);
  try {
    await run('ip', ['addr', 'add', `10.250.${subnet}.1/24`, 'dev', name]);
    await run('ip', ['link', 'set', name, 'up']);
  } catch (err) {
    await run('ip', ['link', 'del', name]).catch(() => undefined);
    throw err;
  }
  return name;
}
