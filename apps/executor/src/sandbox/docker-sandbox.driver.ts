import Docker from 'dockerode';
import { PassThrough } from 'node:stream';
import { AgentChannel } from './agent-channel';
import { LABEL } from './sandbox-labels';
import { AGENT_COMMAND, SANDBOX_USER, SandboxPolicy, WORKSPACE } from './sandbox-policy';

export interface ContainerRef {
  containerId: string;
  volume: string;
}

export interface OwnedContainer {
  containerId: string;
  sessionId?: string;
  tenantId?: string;
  pool: boolean;
  running: boolean;
  volume?: string;
}

/**
 * Everything the executor does to Docker, behind one adapter. The hardening lives here, in
 * one place: `createContainer` is the only way a sandbox comes to exist.
 */
export class DockerSandboxDriver {
  constructor(
    private readonly docker: Docker,
    private readonly executorId: string,
    private readonly policy: SandboxPolicy,
  ) {}

  async ping(): Promise<boolean> {
    try {
      await this.docker.ping();
      return true;
    } catch {
      return false;
    }
  }

  /** Creates and starts a hardened container with its own workspace volume. */
  async create(name: string, labels: Record<string, string>): Promise<ContainerRef> {
    const allLabels = { [LABEL.managed]: 'true', [LABEL.executor]: this.executorId, ...labels };
    const volume = `${name}-ws`;
    await this.docker.createVolume({ Name: volume, Labels: allLabels });
    try {
      const container = await this.docker.createContainer({
        name,
        Image: this.policy.image,
        Labels: allLabels,
        User: SANDBOX_USER,
        WorkingDir: WORKSPACE,
        Cmd: [...AGENT_COMMAND, 'serve'],
        Env: ['HOME=/home/sandbox', 'LANG=C.UTF-8', `RUNBOX_FILE_SEARCH_TIMEOUT=${this.policy.fileSearchTimeoutSeconds}`],
        NetworkDisabled: !this.policy.network,
        HostConfig: {
          // PID 1 reaps the orphans that background jobs leave behind.
          Init: true,
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          ReadonlyRootfs: true,
          Tmpfs: { '/tmp': `rw,exec,nosuid,nodev,size=${this.policy.tmpfsSizeMb}m,mode=1777` },
          Mounts: [{ Type: 'volume', Source: volume, Target: WORKSPACE }],
          NetworkMode: this.policy.network ? 'bridge' : 'none',
          Memory: this.policy.memoryBytes,
          MemorySwap: this.policy.memoryBytes,
          NanoCpus: this.policy.nanoCpus,
          PidsLimit: this.policy.pidsLimit,
          Privileged: false,
          RestartPolicy: { Name: 'no' },
        },
      });
      await container.start();
      return { containerId: container.id, volume };
    } catch (err) {
      await this.removeVolume(volume);
      throw err;
    }
  }

  /**
   * Opens the long-lived channel: one exec of the agent's `attach` relay, its stdio
   * hijacked. Docker multiplexes stdout/stderr on one stream; only stdout carries frames.
   */
  async attach(containerId: string, onClose: () => void): Promise<AgentChannel> {
    const exec = await this.docker.getContainer(containerId).exec({
      Cmd: [...AGENT_COMMAND, 'attach'],
      User: SANDBOX_USER,
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
    if (ref.containerId) {
      try {
        await this.docker.getContainer(ref.containerId).remove({ force: true, v: false });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    if (ref.volume && !keepVolume) await this.removeVolume(ref.volume);
  }

  async stop(containerId: string): Promise<void> {
    try {
      await this.docker.getContainer(containerId).remove({ force: true });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async removeVolume(volume: string): Promise<void> {
    try {
      await this.docker.getVolume(volume).remove({ force: true });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** Every container carrying this executor's label, whatever state it is in. */
  async listOwned(): Promise<OwnedContainer[]> {
    const list = await this.docker.listContainers({
      all: true,
      filters: { label: [`${LABEL.managed}=true`, `${LABEL.executor}=${this.executorId}`] },
    });
    return list.map((c) => ({
      containerId: c.Id,
      sessionId: c.Labels[LABEL.session],
      tenantId: c.Labels[LABEL.tenant],
      pool: c.Labels[LABEL.pool] === 'true',
      running: c.State === 'running',
      volume: c.Mounts?.find((m) => m.Destination === WORKSPACE)?.Name,
    }));
  }

  async listOwnedVolumes(): Promise<Array<{ name: string; sessionId?: string }>> {
    const res = await this.docker.listVolumes({
      filters: { label: [`${LABEL.managed}=true`, `${LABEL.executor}=${this.executorId}`] },
    });
    return (res.Volumes ?? []).map((v) => ({ name: v.Name, sessionId: v.Labels?.[LABEL.session] }));
  }
}

function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { statusCode?: number }).statusCode === 404;
}
