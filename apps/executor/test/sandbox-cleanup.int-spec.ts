import { countExecutorResources, eventually } from '@app/testing';
import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { DockerSandboxDriver } from '../src/sandbox/docker-sandbox.driver';
import { LABEL } from '../src/sandbox/sandbox-labels';
import { SandboxService } from '../src/sandbox/sandbox.service';
import { ExecutorHarness } from './support/executor-harness';

const docker = new Docker();

async function exists(kind: 'container' | 'volume', id: string): Promise<boolean> {
  try {
    await (kind === 'container' ? docker.getContainer(id).inspect() : docker.getVolume(id).inspect());
    return true;
  } catch {
    return false;
  }
}

async function ownedContainerIds(executorId: string): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`runbox.executor=${executorId}`] } });
  return list.map((c) => c.Id);
}

describe('idle reaping (workspace kept)', () => {
  let harness: ExecutorHarness;

  beforeAll(async () => {
    harness = await new ExecutorHarness({ RUNBOX_SANDBOX_IDLE_TTL_SECONDS: '1', RUNBOX_SANDBOX_SWEEP_SECONDS: '3600' }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('stops and removes an idle container, keeps its volume, and recreates on it at the next call', async () => {
    const session = await harness.newSession();
    await harness.terminal(session, 'echo kept-data > /workspace/note.txt && export GONE=1');
    const first = (await harness.sandboxRow(session.sessionId))!;
    expect(first.state).toBe('ready');

    const stopped = await eventually('the reaper', async () => {
      const row = await harness.sandboxRow(session.sessionId);
      return row?.state === 'stopped' ? row : undefined;
    });
    expect(stopped.container_id).toBeNull();
    expect(stopped.volume).toBe(first.volume);
    expect(await exists('container', first.container_id!)).toBe(false);
    expect(await exists('volume', first.volume!)).toBe(true);

    const again = await harness.terminal(session, 'cat /workspace/note.txt; echo "GONE=[$GONE]"');
    expect(again.output).toContain('kept-data');
    // Shell state lives in the container's memory and /tmp: a new container starts clean.
    expect(again.output).toContain('GONE=[]');
    const second = (await harness.sandboxRow(session.sessionId))!;
    expect(second).toMatchObject({ state: 'ready', volume: first.volume });
    expect(second.container_id).not.toBe(first.container_id);
  });

  it('does not reap a sandbox while a call is running in it', async () => {
    const session = await harness.newSession();
    const result = await harness.terminal(session, 'sleep 3; echo survived');
    expect(result.output).toContain('survived');
    expect(result.metadata.exit_code).toBe(0);
  });

  it('leaves no container or volume once its sessions are deleted and the executor stops', async () => {
    await harness.deleteSessionsAndStopExecutor();
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
  });
});

describe('idle reaping (workspace dropped by policy)', () => {
  let harness: ExecutorHarness;

  beforeAll(async () => {
    harness = await new ExecutorHarness({
      RUNBOX_SANDBOX_IDLE_TTL_SECONDS: '1',
      RUNBOX_SANDBOX_KEEP_VOLUME_ON_IDLE: '0',
      RUNBOX_SANDBOX_SWEEP_SECONDS: '3600',
    }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('removes the volume with the container, and the next call starts on an empty workspace', async () => {
    const session = await harness.newSession();
    await harness.terminal(session, 'echo lost > /workspace/note.txt');
    const first = (await harness.sandboxRow(session.sessionId))!;
    await eventually('the reaper', async () => (await harness.sandboxRow(session.sessionId))?.state === 'stopped');
    expect((await harness.sandboxRow(session.sessionId))!.volume).toBeNull();
    expect(await exists('volume', first.volume!)).toBe(false);
    const again = await harness.terminal(session, 'ls -A /workspace | grep -c note.txt || true');
    expect(again.output).toMatch(/stdout:\n0/);
  });

  it('leaves no container or volume once its sessions are deleted and the executor stops', async () => {
    await harness.deleteSessionsAndStopExecutor();
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
  });
});

describe('orphan sweep and dead containers', () => {
  let harness: ExecutorHarness;

  beforeAll(async () => {
    harness = await new ExecutorHarness({ RUNBOX_SANDBOX_SWEEP_SECONDS: '1' }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('at start-up removes what a crashed executor left behind and keeps what live sessions own', async () => {
    const kept = await harness.newSession();
    await harness.terminal(kept, 'cd /tmp && export ALIVE=yes && echo mine > /workspace/mine.txt');
    const deleted = await harness.newSession();
    await harness.terminal(deleted, 'true');
    const deletedRow = (await harness.sandboxRow(deleted.sessionId))!;
    const keptRow = (await harness.sandboxRow(kept.sessionId))!;

    // The crash: the executor goes away, its session is deleted while nobody answers the
    // release, and leftovers carrying its labels but known to nobody are on the host.
    await harness.stopExecutor();
    await harness.markSessionDeleted(deleted.sessionId);
    const driver = harnessDriver(harness);
    const ghostSession = `ses_ghost${randomBytes(6).toString('hex')}`;
    const ghost = await driver.create(`runbox-${ghostSession}`, { [LABEL.session]: ghostSession, [LABEL.tenant]: harness.tenantId });
    const ghostPool = await driver.create(`runbox-pool-${randomBytes(6).toString('hex')}`, { [LABEL.pool]: 'true' });
    const strayVolume = `runbox-stray-${randomBytes(6).toString('hex')}`;
    await docker.createVolume({ Name: strayVolume, Labels: { [LABEL.managed]: 'true', [LABEL.executor]: harness.executorId } });

    await harness.startExecutor();
    // The start-up sweep has run by the time the executor is up.
    const left = await ownedContainerIds(harness.executorId);
    expect(left).toEqual([keptRow.container_id]);
    for (const volume of [ghost.volume, ghostPool.volume, strayVolume, deletedRow.volume!]) {
      expect(await exists('volume', volume)).toBe(false);
    }
    expect(await exists('volume', keptRow.volume!)).toBe(true);
    expect((await harness.sandboxRow(deleted.sessionId))!.state).toBe('removed');

    const after = await harness.terminal(kept, 'echo "$PWD $ALIVE"; cat /workspace/mine.txt');
    expect(after.output).toContain('/tmp yes');
    expect(after.output).toContain('mine');
  });

  it('replaces a container that died while idle, on the same workspace', async () => {
    const session = await harness.newSession();
    await harness.terminal(session, 'echo still-here > /workspace/f.txt');
    const { container_id: containerId, volume } = (await harness.sandboxRow(session.sessionId))!;
    await docker.getContainer(containerId!).kill();
    const result = await harness.terminal(session, 'cat /workspace/f.txt');
    expect(result.output).toContain('still-here');
    const row = (await harness.sandboxRow(session.sessionId))!;
    expect(row.volume).toBe(volume);
    expect(row.container_id).not.toBe(containerId);
  });

  it('runs periodically while the executor is up', async () => {
    const live = await harness.newSession();
    await harness.terminal(live, 'true');
    const driver = harnessDriver(harness);
    const ghost = await plantGhost(async () => {
      const ghostSession = `ses_ghost${randomBytes(6).toString('hex')}`;
      return driver.create(`runbox-${ghostSession}`, { [LABEL.session]: ghostSession, [LABEL.tenant]: harness.tenantId });
    });
    // The sweep removes the container, then its volume: wait for both, not just the first.
    await eventually('the periodic sweep', async () => !(await exists('container', ghost.containerId)) && !(await exists('volume', ghost.volume)));

    // A session deleted while its executor did not hear about it loses its sandbox too.
    const { container_id: containerId } = (await harness.sandboxRow(live.sessionId))!;
    await harness.markSessionDeleted(live.sessionId);
    await eventually('the sweep of a deleted session', async () => !(await exists('container', containerId!)));
    expect(harness.get(SandboxService).existingChannel(live.tenantId, live.sessionId)).toBeUndefined();
  });

  it('leaves no container or volume once its sessions are deleted and the executor stops', async () => {
    await harness.deleteSessionsAndStopExecutor();
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
  });
});

/** The production driver, with the harness executor's id and policy, usable while the executor is stopped. */
function harnessDriver(harness: ExecutorHarness): DockerSandboxDriver {
  return new DockerSandboxDriver(docker, harness.executorId, {
    image: harness.config.RUNBOX_SANDBOX_IMAGE,
    memoryBytes: 256 * 1024 * 1024,
    nanoCpus: 500_000_000,
    pidsLimit: 64,
    network: false,
    tmpfsSizeMb: 16,
    fileSearchTimeoutSeconds: 20,
  });
}

/**
 * Creates a ghost sandbox while the periodic sweep is running: the sweep may already remove it
 * between its creation and its start (Docker then refuses the start with 404 or 409), which is
 * the sweep doing its job before the test could watch. Another ghost is planted then, so the
 * test still sees the sweep remove one that was fully up.
 */
async function plantGhost<T>(create: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await create();
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode;
      if (attempt === 5 || (status !== 404 && status !== 409)) throw err;
    }
  }
}
