import type { Logger } from 'pino';
import { AgentChannel } from './agent-channel';
import { DockerSandboxDriver } from './docker-sandbox.driver';
import { LABEL } from './sandbox-labels';
import { SandboxRepository } from './sandbox.repository';

export class SessionNotFoundError extends Error {
  constructor(sessionId: string) {
    super(`session ${sessionId} not found`);
  }
}

export class SandboxUnavailableError extends Error {}

/** A session's container as this executor holds it. */
interface LiveSandbox {
  tenantId: string;
  sessionId: string;
  containerId: string;
  volume: string;
  channel?: AgentChannel;
  lastUsed: number;
}

const ATTACH_TIMEOUT_MS = 15_000;

/**
 * Owns the sandboxes of this executor: finds or makes a session's container on first use,
 * keeps one open channel into each, and forgets them when they are released or reaped.
 */
export class SandboxService {
  private readonly live = new Map<string, LiveSandbox>();
  private readonly opening = new Map<string, Promise<LiveSandbox>>();

  constructor(
    readonly executorId: string,
    private readonly driver: DockerSandboxDriver,
    private readonly repo: SandboxRepository,
    private readonly logger: Logger,
  ) {}

  get size(): number {
    return this.live.size;
  }

  /** The open channel into the session's sandbox, creating the sandbox on first use. */
  async channelFor(tenantId: string, sessionId: string): Promise<AgentChannel> {
    let sandbox = this.live.get(sessionId);
    if (sandbox && sandbox.tenantId !== tenantId) throw new SessionNotFoundError(sessionId);
    if (!sandbox) sandbox = await this.open(tenantId, sessionId);
    sandbox.lastUsed = Date.now();
    if (sandbox.channel?.isOpen) return sandbox.channel;
    try {
      sandbox.channel = await this.attach(sandbox);
    } catch (err) {
      // A container that died while idle (OOM, a host restart) is replaced, keeping its workspace.
      if ((await this.diagnose(tenantId, sessionId)) === 'alive') throw err;
      sandbox = await this.open(tenantId, sessionId);
      sandbox.channel = await this.attach(sandbox);
    }
    return sandbox.channel;
  }

  /** After a broken channel: is the container itself still there? */
  async diagnose(tenantId: string, sessionId: string): Promise<'alive' | 'dead'> {
    const sandbox = this.live.get(sessionId);
    if (!sandbox) return 'dead';
    // The channel breaks a moment before Docker reports the container gone; look twice.
    if (await this.driver.isRunning(sandbox.containerId)) {
      await settle(500);
      if (await this.driver.isRunning(sandbox.containerId)) return 'alive';
    }
    this.live.delete(sessionId);
    await this.driver.remove({ containerId: sandbox.containerId }, true);
    await this.repo.setState(tenantId, sessionId, 'failed', 'the sandbox container stopped unexpectedly');
    return 'dead';
  }

  async release(tenantId: string, sessionId: string): Promise<boolean> {
    const sandbox = this.live.get(sessionId);
    this.live.delete(sessionId);
    sandbox?.channel?.close('session released');
    const record = await this.repo.find(tenantId, sessionId);
    const containerId = sandbox?.containerId ?? record?.containerId;
    const volume = sandbox?.volume ?? record?.volume ?? `${containerName(sessionId)}-ws`;
    await this.driver.remove({ containerId, volume });
    if (record) await this.repo.setState(tenantId, sessionId, 'removed');
    return containerId !== undefined && containerId !== null;
  }

  private open(tenantId: string, sessionId: string): Promise<LiveSandbox> {
    let pending = this.opening.get(sessionId);
    if (!pending) {
      pending = this.adoptOrCreate(tenantId, sessionId).finally(() => this.opening.delete(sessionId));
      this.opening.set(sessionId, pending);
    }
    return pending;
  }

  private async adoptOrCreate(tenantId: string, sessionId: string): Promise<LiveSandbox> {
    if (!(await this.repo.sessionIsLive(tenantId, sessionId))) throw new SessionNotFoundError(sessionId);
    const record = await this.repo.find(tenantId, sessionId);
    if (record?.containerId && record.executorId === this.executorId && record.state === 'ready') {
      if (await this.driver.isRunning(record.containerId)) {
        // Our own container from before a restart: its shell state and jobs are intact.
        return this.remember({ tenantId, sessionId, containerId: record.containerId, volume: record.volume ?? '', lastUsed: Date.now() });
      }
      await this.driver.remove({ containerId: record.containerId }, true);
    }
    await this.repo.claim({ tenantId, sessionId, executorId: this.executorId, containerId: null, volume: null, state: 'creating' });
    try {
      const ref = await this.driver.create(containerName(sessionId), { [LABEL.session]: sessionId, [LABEL.tenant]: tenantId });
      await this.repo.save({ tenantId, sessionId, executorId: this.executorId, ...ref, state: 'ready' });
      this.logger.info({ tenantId, sessionId, containerId: ref.containerId }, 'sandbox created');
      return this.remember({ tenantId, sessionId, ...ref, lastUsed: Date.now() });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      await this.repo.setState(tenantId, sessionId, 'failed', message);
      this.logger.error({ tenantId, sessionId, err }, 'sandbox creation failed');
      throw new SandboxUnavailableError(`could not start the sandbox: ${message}`);
    }
  }

  private remember(sandbox: LiveSandbox): LiveSandbox {
    this.live.set(sandbox.sessionId, sandbox);
    return sandbox;
  }

  private async attach(sandbox: LiveSandbox): Promise<AgentChannel> {
    const channel = await this.driver.attach(sandbox.containerId, () => undefined);
    try {
      await channel.ready(ATTACH_TIMEOUT_MS);
    } catch (err) {
      channel.close('attach failed');
      throw new SandboxUnavailableError(`could not reach the sandbox agent: ${err instanceof Error ? err.message : String(err)}`);
    }
    return channel;
  }

  async closeAll(): Promise<void> {
    for (const sandbox of this.live.values()) sandbox.channel?.close('executor shutting down');
    this.live.clear();
  }
}

export function containerName(sessionId: string): string {
  return `runbox-${sessionId}`;
}

function settle(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
