import type { Logger } from 'pino';
import { AgentChannel } from './agent-channel';
import { DockerSandboxDriver, OwnedContainer } from './docker-sandbox.driver';
import { LABEL } from './sandbox-labels';
import { SandboxPool } from './sandbox-pool';
import { ProvisionedSandbox, SandboxRef, SandboxRuntime, WantedResources } from './sandbox-runtime';

/** A session's container name; the session id in it makes a leftover easy to recognise. */
export function containerName(sessionId: string): string {
  return `runbox-${sessionId}`;
}

/** Sandboxes as hardened Docker containers on this executor's host, with the warm pool. */
export class DockerRuntime implements SandboxRuntime {
  readonly backend = 'docker' as const;

  constructor(
    private readonly driver: DockerSandboxDriver,
    readonly pool: SandboxPool,
    private readonly logger: Logger,
  ) {}

  start(room: () => number): void {
    this.pool.start(room);
  }

  takeWarm(): ProvisionedSandbox | undefined {
    const warm = this.pool.take();
    return warm && { containerId: warm.containerId, volume: warm.volume, channel: warm.channel };
  }

  returnWarm(sandbox: ProvisionedSandbox): void {
    if (sandbox.containerId) this.pool.giveBack(sandbox.containerId);
  }

  async provision(tenantId: string, sessionId: string, workspace: string | null): Promise<ProvisionedSandbox> {
    const labels = { [LABEL.session]: sessionId, [LABEL.tenant]: tenantId };
    return this.driver.create(containerName(sessionId), labels, workspace ?? undefined);
  }

  isAlive(ref: SandboxRef): Promise<boolean> {
    return ref.containerId ? this.driver.isRunning(ref.containerId) : Promise.resolve(false);
  }

  async connect(ref: SandboxRef, timeoutMs: number): Promise<AgentChannel> {
    if (!ref.containerId) throw new Error('the sandbox has no container');
    const channel = await this.driver.attach(ref.containerId);
    try {
      await channel.ready(timeoutMs);
    } catch (err) {
      channel.close('attach failed');
      throw err;
    }
    return channel;
  }

  async destroy(ref: SandboxRef, keepWorkspace: boolean): Promise<void> {
    await this.driver.remove(ref, keepWorkspace);
    if (ref.containerId) this.pool.forget(ref.containerId);
  }

  async sweep(wanted: () => Promise<WantedResources>): Promise<number> {
    const [containers, volumes] = await Promise.all([this.driver.listOwned(), this.driver.listOwnedVolumes()]);
    // Read after listing: whatever was made before the listing is known by now.
    const want = await wanted();
    const pool = this.pool.owned();
    const helpers = this.driver.diskHelpersAtWork();
    const busy = (sessionId?: string) => sessionId !== undefined && want.busySessions.has(sessionId);
    const wantedContainer = (c: OwnedContainer) =>
      helpers.has(c.name) ||
      want.containers.has(c.containerId) || pool.containers.has(c.containerId) || pool.containers.has(c.name) || busy(c.sessionId);
    const doomed = containers.filter((c) => !wantedContainer(c));
    const mounted = new Set(containers.filter(wantedContainer).map((c) => c.volume));
    const doomedVolumes = volumes.filter(
      (v) => !want.volumes.has(v.name) && !pool.volumes.has(v.name) && !mounted.has(v.name) && !busy(v.sessionId),
    );
    let removed = 0;
    const attempt = async (what: Record<string, unknown>, remove: () => Promise<void>) => {
      try {
        await remove();
        removed++;
        this.logger.info(what, 'sweep: removed what no live session owns');
      } catch (err) {
        this.logger.warn({ ...what, err }, 'sweep: removal failed; the next sweep retries');
      }
    };
    // Containers first: a volume cannot go while a container still mounts it.
    for (const c of doomed) {
      await attempt({ containerId: c.containerId, sessionId: c.sessionId, pool: c.pool }, () => this.driver.removeContainer(c.containerId));
    }
    for (const v of doomedVolumes) {
      await attempt({ volume: v.name, sessionId: v.sessionId }, () => this.driver.removeVolume(v.name));
    }
    return removed + (await this.driver.sweepDiskImages());
  }

  close(): Promise<void> {
    return this.pool.drain();
  }
}
