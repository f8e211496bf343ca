import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { createConnection, Socket } from 'node:net';
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { Logger } from 'pino';
import { AgentChannel } from '../agent-channel';
import { ProvisionedSandbox, SandboxRef, SandboxRuntime, WantedResources } from '../sandbox-runtime';
import { findAgentScript, killProcessesMarked } from './host-processes';

/** sun_path holds 108 bytes with its terminating NUL. */
const MAX_SOCKET_PATH = 107;
const AGENT_START_TIMEOUT_MS = 15_000;
/** No secrets of the executor's own environment reach commands on the host. */
const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export class LocalBackendError extends Error {}

/**
 * The `local` backend: the same sandbox agent, run as a plain process on the executor host
 * with no isolation at all. Only for development, and only when the operator sets
 * RUNBOX_UNSAFE_LOCAL_BACKEND=1 (otherwise this class is never constructed).
 *
 * Each session gets `<RUNBOX_LOCAL_WORKSPACES>/<executor>/<session>/` with `workspace/` (the
 * commands' working directory, what /workspace is in a container), `home/` and `agent/`
 * (its Unix socket, shell state and log). The agent is started detached, so like a container it
 * outlives an executor restart; the next executor connects to its socket again.
 */
export class LocalRuntime implements SandboxRuntime {
  readonly backend = 'local' as const;
  private readonly root: string;

  constructor(
    workspacesRoot: string,
    executorId: string,
    private readonly logger: Logger,
    private readonly agentScript: string = findAgentScript(),
  ) {
    this.root = resolve(workspacesRoot, executorId);
  }

  start(): void {}

  takeWarm(): undefined {
    return undefined; // no pool: a local agent starts in a few milliseconds
  }

  returnWarm(): void {}

  async provision(_tenantId: string, sessionId: string, workspace: string | null): Promise<ProvisionedSandbox> {
    const dir = this.inside(workspace ?? join(this.root, sessionId));
    const paths = agentPaths(dir);
    if (Buffer.byteLength(paths.socket) > MAX_SOCKET_PATH) {
      throw new LocalBackendError(
        `the agent socket path ${paths.socket} is longer than ${MAX_SOCKET_PATH} bytes; set RUNBOX_LOCAL_WORKSPACES to a shorter directory`,
      );
    }
    await mkdir(paths.workspace, { recursive: true });
    await mkdir(paths.home, { recursive: true });
    await mkdir(paths.agentDir, { recursive: true, mode: 0o700 });
    const log = openSync(paths.log, 'a');
    try {
      const child = spawn('python3', ['-u', this.agentScript, 'serve'], {
        cwd: paths.workspace,
        env: {
          PATH: HOST_PATH,
          HOME: paths.home,
          LANG: 'C.UTF-8',
          RUNBOX_WORKSPACE: paths.workspace,
          RUNBOX_AGENT_SOCKET: paths.socket,
          RUNBOX_AGENT_STATE: paths.state,
        },
        detached: true,
        stdio: ['ignore', log, log],
      });
      child.unref();
      let exited: string | undefined;
      child.once('exit', (code, signal) => (exited = `the local agent exited (${signal ?? code}); see ${paths.log}`));
      child.once('error', (err) => (exited = `the local agent could not start: ${err.message}`));
      const deadline = Date.now() + AGENT_START_TIMEOUT_MS;
      while (!(await canConnect(paths.socket))) {
        if (exited) throw new LocalBackendError(exited);
        if (Date.now() > deadline) throw new LocalBackendError(`the local agent did not open ${paths.socket} in time`);
        await new Promise((r) => setTimeout(r, 10));
      }
    } catch (err) {
      await killProcessesMarked(marker(paths.socket));
      throw err;
    } finally {
      closeSync(log);
    }
    return { containerId: null, volume: dir };
  }

  isAlive(ref: SandboxRef): Promise<boolean> {
    return ref.volume ? canConnect(agentPaths(ref.volume).socket) : Promise.resolve(false);
  }

  async connect(ref: SandboxRef, timeoutMs: number): Promise<AgentChannel> {
    if (!ref.volume) throw new LocalBackendError('the local sandbox has no directory');
    const socket = await open(agentPaths(this.inside(ref.volume)).socket, timeoutMs);
    return new AgentChannel(socket, socket, undefined, false);
  }

  async destroy(ref: SandboxRef, keepWorkspace: boolean): Promise<void> {
    if (!ref.volume) return;
    const dir = this.inside(ref.volume);
    const paths = agentPaths(dir);
    await killProcessesMarked(marker(paths.socket));
    await rm(keepWorkspace ? paths.agentDir : dir, { recursive: true, force: true });
  }

  async sweep(wanted: () => Promise<WantedResources>): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.root);
    } catch {
      return 0; // nothing made yet
    }
    const want = await wanted();
    let removed = 0;
    for (const name of names) {
      const dir = join(this.root, name);
      if (want.volumes.has(dir) || want.busySessions.has(name)) continue;
      this.logger.info({ dir }, 'sweep: removing a local sandbox no live session owns');
      await this.destroy({ containerId: null, volume: dir }, false);
      removed++;
    }
    return removed;
  }

  async close(): Promise<void> {}

  /** Every path this runtime touches must be a session directory under its root. */
  private inside(dir: string): string {
    const abs = resolve(dir);
    const rel = relative(this.root, abs);
    if (!rel || rel.startsWith('..') || isAbsolute(rel) || rel.includes('/')) {
      throw new LocalBackendError(`${dir} is not a session directory under ${this.root}`);
    }
    return abs;
  }
}

function agentPaths(dir: string) {
  const agentDir = join(dir, 'agent');
  return {
    workspace: join(dir, 'workspace'),
    home: join(dir, 'home'),
    agentDir,
    socket: join(agentDir, 'agent.sock'),
    state: join(agentDir, 'state'),
    log: join(agentDir, 'agent.log'),
  };
}

function marker(socket: string): string {
  return `RUNBOX_AGENT_SOCKET=${socket}`;
}

function open(path: string, timeoutMs: number): Promise<Socket> {
  return new Promise((resolvePromise, reject) => {
    const socket = createConnection(path);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new LocalBackendError(`the local agent at ${path} did not accept a connection in time`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolvePromise(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(new LocalBackendError(`cannot reach the local agent at ${path}: ${err.message}`));
    });
  });
}

async function canConnect(path: string): Promise<boolean> {
  try {
    (await open(path, 1_000)).destroy();
    return true;
  } catch {
    return false;
  }
}
