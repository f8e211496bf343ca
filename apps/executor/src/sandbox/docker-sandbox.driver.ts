import Docker from 'dockerode';
import { PassThrough } from 'node:stream';
import { AgentChannel } from './agent-channel';
import { hardenedContainerSpec } from './container-spec';
import { LABEL } from './sandbox-labels';
import { AGENT_COMMAND, AGENT_USER, SandboxPolicy, WORKSPACE } from './sandbox-policy';
import type { WorkspaceVolumes } from './workspace-volume';

export interface ContainerRef {
  containerId: string;
  volume: string;
}

/** The volume a new container gets when it has no kept workspace. */
export function workspaceVolumeOf(containerName: string): string {
  return `${containerName}-ws`;
}

export interface OwnedContainer {
  containerId: string;
  name: string;
  sessionId?: string;
  pool: boolean;
  running: boolean;
  volume?: string;
}

export interface OwnedVolume {
  name: string;
  sessionId?: string;
  pool: boolean;
}

/**
 * Everything the executor does to Docker, behind one adapter. The hardening lives here, in
 * one place: `create` is the only way a sandbox comes to exist.
 */
export class DockerSandboxDriver {
  constructor(
    private readonly docker: Docker,
    private readonly executorId: string,
    private readonly policy: SandboxPolicy,
    /** Size-limited workspaces; without it (RUNBOX_SANDBOX_DISK_MB=0) a workspace is a plain volume. */
    private readonly workspaces?: WorkspaceVolumes,
  ) {}

  async ping(): Promise<boolean> {
    try {
      await this.docker.ping();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Creates and starts a hardened container. Its workspace is `workspace` when given (a
   * volume kept from the session's earlier container), else a new volume named after it.
   */
  async create(name: string, labels: Record<string, string>, workspace?: string): Promise<ContainerRef> {
    const allLabels = { [LABEL.managed]: 'true', [LABEL.executor]: this.executorId, ...labels };
    const volume = workspace ?? workspaceVolumeOf(name);
    const spec = hardenedContainerSpec(name, allLabels, volume, this.policy);
    try {
      await this.workspaces?.prepare(volume, allLabels);
      let container: Docker.Container;
      try {
        container = await this.docker.createContainer(spec);
      } catch (err) {
        // A container left under this name by a crash mid-creation: it is ours (the name
        // carries the session id), so it goes, and the creation is tried once more.
        if (statusOf(err) !== 409) throw err;
        await this.removeContainer(name);
        container = await this.docker.createContainer(spec);
      }
      await container.start();
      return { containerId: container.id, volume };
    } catch (err) {
      await this.removeContainer(name).catch(() => undefined);
      if (!workspace) await this.removeVolume(volume).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Opens the long-lived channel: one exec of the agent's `attach` relay, its stdio
   * hijacked. Docker multiplexes stdout/stderr on one stream; only stdout carries frames.
   * The relay runs as the agent's user, so no tool process can kill it or write to its stdout.
   */
  async attach(containerId: string, onClose: () => void = () => undefined): Promise<AgentChannel> {
    const exec = await this.docker.getContainer(containerId).exec({
      Cmd: [...AGENT_COMMAND, 'attach'],
      User: AGENT_USER,
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    const stream = await exec.start({ hijack: true, stdin: true });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    this.docker.modem.demuxStream(stream, stdout, stderr);
    stderr.resume();
    stream.on('end', () => stdout.end());
    stream.on('close', () => stdout.end());
    return new AgentChannel(stream, stdout, onClose);
  }

  async isRunning(containerId: string): Promise<boolean> {
    try {
      const info = await this.docker.getContainer(containerId).inspect();
      return info.State.Running;
    } catch {
      return false;
    }
  }

  /** Removes the container (running or not) and, unless told to keep it, its volume. */
  async remove(ref: { containerId?: string | null; volume?: string | null }, keepVolume = false): Promise<void> {
    if (ref.containerId) await this.removeContainer(ref.containerId);
    if (ref.volume && !keepVolume) await this.removeVolume(ref.volume);
  }

  async removeContainer(idOrName: string): Promise<void> {
    try {
      await this.docker.getContainer(idOrName).remove({ force: true, v: false });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }

  async removeVolume(volume: string): Promise<void> {
    if (this.workspaces) return this.workspaces.remove(volume);
    try {
      await this.docker.getVolume(volume).remove({ force: true });
    } catch (err) {
      // 404: already gone. 409: still mounted by a container being removed; the next sweep takes it.
      if (statusOf(err) !== 404) throw err;
    }
  }

  /** Every container carrying this executor's label, whatever state it is in. */
  async listOwned(): Promise<OwnedContainer[]> {
    const list = await this.docker.listContainers({ all: true, filters: { label: this.ownLabels() } });
    return list.map((c) => ({
      containerId: c.Id,
      name: (c.Names?.[0] ?? '').replace(/^\//, ''),
      sessionId: c.Labels[LABEL.session],
      pool: c.Labels[LABEL.pool] === 'true',
      running: c.State === 'running',
      volume: c.Mounts?.find((m) => m.Destination === WORKSPACE)?.Name,
    }));
  }

  async listOwnedVolumes(): Promise<OwnedVolume[]> {
    const res = await this.docker.listVolumes({ filters: { label: this.ownLabels() } });
    return (res.Volumes ?? []).map((v) => ({
      name: v.Name,
      sessionId: v.Labels?.[LABEL.session],
      pool: v.Labels?.[LABEL.pool] === 'true',
    }));
  }

  /** Removes workspace disk images no volume uses (see WorkspaceVolumes.sweepImages). */
  sweepDiskImages(): Promise<number> {
    return this.workspaces?.sweepImages() ?? Promise.resolve(0);
  }

  /** Names of the disk helper containers at work right now: the sweep leaves them alone. */
  diskHelpersAtWork(): ReadonlySet<string> {
    return this.workspaces?.helpersAtWork() ?? new Set();
  }

  private ownLabels(): string[] {
    return [`${LABEL.managed}=true`, `${LABEL.executor}=${this.executorId}`];
  }
}

function statusOf(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null ? (err as { statusCode?: number }).statusCode : undefined;
}
