import { countExecutorResources, eventually, executorDiskFolder, executorDisks } from '@app/testing';
import Docker from 'dockerode';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DISK_HELPER_LABEL, EngineDiskImages } from '../src/sandbox/docker-workspace-disks';
import { SandboxPool } from '../src/sandbox/sandbox-pool';
import { SandboxService } from '../src/sandbox/sandbox.service';
import { ExecutorHarness, TestSession } from './support/executor-harness';

const MIB = 1024 * 1024;
const LIMIT_MB = 64;
const docker = new Docker();

async function volumeExists(name: string): Promise<boolean> {
  try {
    await docker.getVolume(name).inspect();
    return true;
  } catch {
    return false;
  }
}

/** `df -k /workspace` inside the sandbox: the filesystem's size in KiB. */
async function workspaceSizeKib(harness: ExecutorHarness, session: TestSession): Promise<number> {
  const df = await harness.terminal(session, "df -k /workspace | tail -n 1 | awk '{print \"size=\" $2}'");
  return Number(/size=(\d+)/.exec(df.output)?.[1]);
}

/** Writes 100 MiB into the workspace; answers what dd printed and its exit code. */
async function writePastTheLimit(harness: ExecutorHarness, session: TestSession, file: string): Promise<string> {
  const res = await harness.terminal(session, `dd if=/dev/zero of=/workspace/${file} bs=1M count=100 2>&1; echo "exit=$?"`);
  return res.output;
}

/** The workspace disk limit against the real Docker engine and kernel. */
describe('workspace disk limit', () => {
  let harness: ExecutorHarness;
  let session: TestSession;
  let volume: string;
  let image: string;

  beforeAll(async () => {
    harness = await new ExecutorHarness({
      RUNBOX_SANDBOX_DISK_MB: String(LIMIT_MB),
      RUNBOX_SANDBOX_IDLE_TTL_SECONDS: '1',
      RUNBOX_SANDBOX_SWEEP_SECONDS: '3600',
    }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('gives the sandbox a workspace of the limit, refuses a write past it with ENOSPC, and costs the host at most the limit', async () => {
    session = await harness.newSession();
    // No lost+found, and the sandbox user's, like a plain volume.
    const fresh = await harness.terminal(session, 'echo "entries=$(ls -A /workspace | tr "\\n" " ") owner=$(stat -c %u /workspace)"');
    expect(fresh.output).toContain('entries=.runbox  owner=1000');
    const sizeKib = await workspaceSizeKib(harness, session);
    expect(sizeKib).toBeLessThanOrEqual(LIMIT_MB * 1024);
    expect(sizeKib).toBeGreaterThan((LIMIT_MB - 8) * 1024);

    volume = (await harness.sandboxRow(session.sessionId))!.volume!;
    image = join((await executorDiskFolder(harness.executorId))!, `${volume}.img`);
    const before = statSync(image);
    expect(before.size).toBe(LIMIT_MB * MIB);
    // Sparse: an empty workspace takes a few MiB of the host's disk, not the limit.
    expect(before.blocks * 512).toBeLessThan(LIMIT_MB * MIB * 0.25);

    const dd = await writePastTheLimit(harness, session, 'fill');
    expect(dd).toContain('No space left on device');
    expect(dd).toContain('exit=1');

    const after = statSync(image);
    expect(after.size).toBe(LIMIT_MB * MIB);
    expect(after.blocks * 512).toBeLessThanOrEqual(LIMIT_MB * MIB);
    expect(after.blocks * 512).toBeGreaterThan((LIMIT_MB - 16) * MIB);
  });

  it('keeps the limit and the files when the sandbox is restarted on the same workspace', async () => {
    const first = (await harness.sandboxRow(session.sessionId))!.container_id;
    await eventually('the idle reaper', async () => (await harness.sandboxRow(session.sessionId))?.state === 'stopped');
    expect(await volumeExists(volume)).toBe(true);

    const again = await harness.terminal(session, 'echo "size=$(stat -c %s /workspace/fill)"; rm /workspace/fill');
    expect(again.output).toMatch(/size=\d{8}\b/);
    expect((await harness.sandboxRow(session.sessionId))!.container_id).not.toBe(first);
    expect(await workspaceSizeKib(harness, session)).toBeLessThanOrEqual(LIMIT_MB * 1024);
    expect(await writePastTheLimit(harness, session, 'fill-again')).toContain('No space left on device');
  });

  it('keeps the limit after a host reboot, even when its old loop device now carries another image', async () => {
    await eventually('the idle reaper', async () => (await harness.sandboxRow(session.sessionId))?.state === 'stopped');
    const { images, loopDevices } = await executorDisks(harness.executorId);
    expect(images).toHaveLength(1);
    expect(loopDevices).toHaveLength(1);
    const [recorded] = loopDevices;
    // After a reboot the workspace's image is attached to no device, and the device number
    // recorded in its volume may carry another image. That is made here without ever freeing
    // the device, which another test's `losetup -f` could take in between: no container
    // mounts the workspace now, so the image the device holds is moved aside, and an exact
    // copy, a file no device holds, takes its place.
    const folder = (await executorDiskFolder(harness.executorId))!;
    const image = join(folder, images[0]);
    const displaced = join(folder, '..', `displaced-${harness.executorId}.img`);
    renameSync(image, displaced);
    execFileSync('cp', ['--sparse=always', displaced, image]);
    try {
      const again = await harness.terminal(session, 'echo "size=$(stat -c %s /workspace/fill-again)"');
      expect(again.output).toMatch(/size=\d{8}\b/);
      expect(await writePastTheLimit(harness, session, 'one-more')).toContain('No space left on device');
      const now = (await executorDisks(harness.executorId)).loopDevices;
      expect(now).toHaveLength(1);
      expect(now[0]).not.toBe(recorded);
    } finally {
      execFileSync('losetup', ['-d', recorded]);
      rmSync(displaced, { force: true });
    }
  });

  it('leaves no volume, disk image or loop device once the session is deleted', async () => {
    await harness.markSessionDeleted(session.sessionId);
    expect(await harness.get(SandboxService).release(session.tenantId, session.sessionId)).toBe(true);
    expect(await volumeExists(volume)).toBe(false);
    expect(await executorDisks(harness.executorId)).toEqual({ images: [], loopDevices: [] });
  });

  it('makes the disks asked for at once in a few helper containers, each disk an image and loop device of its own', async () => {
    const disks = new EngineDiskImages(docker, harness.config.RUNBOX_SANDBOX_IMAGE, harness.executorId, '1000:1000');
    const helpers = jest.spyOn(docker, 'createContainer');
    const volumes = ['a', 'b', 'c', 'd', 'e', 'f'].map((v) => `runbox-batch-${v}-ws`);
    try {
      const devices = await Promise.all(volumes.map((v) => disks.make(v, 16)));
      // Two helpers start at once; the four asked for meanwhile go to one more.
      expect(helpers).toHaveBeenCalledTimes(3);
      expect(new Set(devices).size).toBe(volumes.length);
      const made = await executorDisks(harness.executorId);
      expect(made.images.sort()).toEqual(volumes.map((v) => `${v}.img`).sort());
      expect(made.loopDevices.sort()).toEqual([...devices].sort());
    } finally {
      helpers.mockRestore();
      await Promise.all(volumes.map((v) => disks.destroy(v)));
    }
    expect(await executorDisks(harness.executorId)).toEqual({ images: [], loopDevices: [] });
  });

  it('sweeps a disk image and loop device that no volume uses, and a helper container, that a crash left', async () => {
    const disks = new EngineDiskImages(docker, harness.config.RUNBOX_SANDBOX_IMAGE, harness.executorId, '1000:1000');
    const device = await disks.make('runbox-leftover-ws', 16);
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    expect(await executorDisks(harness.executorId)).toEqual({ images: ['runbox-leftover-ws.img'], loopDevices: [device] });
    // A helper an executor made and never got to start or remove before it stopped.
    await docker.createContainer({
      name: `runbox-disk-${randomBytes(6).toString('hex')}`,
      Image: harness.config.RUNBOX_SANDBOX_IMAGE,
      Cmd: ['true'],
      Labels: { 'runbox.managed': 'true', 'runbox.executor': harness.executorId, [DISK_HELPER_LABEL]: 'true' },
    });
    expect((await countExecutorResources(harness.executorId)).containers).toBe(1);

    await harness.get(SandboxService).sweep();
    expect(await executorDisks(harness.executorId)).toEqual({ images: [], loopDevices: [] });
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
  });
});

describe('workspace disk limit with the warm pool', () => {
  let harness: ExecutorHarness;

  beforeAll(async () => {
    harness = await new ExecutorHarness({
      RUNBOX_SANDBOX_DISK_MB: String(LIMIT_MB),
      RUNBOX_WARM_POOL_SIZE: '1',
      RUNBOX_SANDBOX_SWEEP_SECONDS: '3600',
    }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('gives a pooled container a size-limited workspace too, and leaves nothing behind', async () => {
    await eventually('a full pool', async () => harness.get(SandboxPool).ready === 1);
    const session = await harness.newSession();
    expect(await workspaceSizeKib(harness, session)).toBeLessThanOrEqual(LIMIT_MB * 1024);
    expect(await writePastTheLimit(harness, session, 'fill')).toContain('No space left on device');
    await eventually('the pool refilled', async () => harness.get(SandboxPool).ready === 1);

    await harness.deleteSessionsAndStopExecutor();
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
    expect(await executorDisks(harness.executorId)).toEqual({ images: [], loopDevices: [] });
  });
});
