import Docker from 'dockerode';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** The Docker volume that holds executors' workspace disk images, one folder per executor. */
const DISKS_VOLUME = 'runbox-disks';

/**
 * Removes every container and volume labelled with the executor id, then its workspace disk
 * images and their loop devices (what `TestStack.stop` and the executor harness do last).
 */
export async function removeExecutorResources(executorId: string): Promise<void> {
  const docker = new Docker();
  const filters = { label: [`runbox.executor=${executorId}`] };
  // In passes, a few at a time: with hundreds of sandboxes (the load bench) a busy engine
  // refused some of several hundred removals asked for at once (and the executor's own
  // drain may be removing the same ones), so what is still there is listed and removed again.
  for (let pass = 0; pass < REMOVAL_PASSES; pass++) {
    const containers = await docker.listContainers({ all: true, filters });
    if (containers.length === 0) break;
    await inBatches(containers, (c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined));
  }
  for (let pass = 0; pass < REMOVAL_PASSES; pass++) {
    const { Volumes } = await docker.listVolumes({ filters });
    if (!Volumes?.length) break;
    await inBatches(Volumes, (v) => docker.getVolume(v.Name).remove({ force: true }).catch(() => undefined));
  }
  // Tests run as root on the engine's host, so the images and loop devices can be reached directly.
  const { loopDevices } = await executorDisks(executorId);
  for (const device of loopDevices) await promisify(execFile)('losetup', ['-d', device]).catch(() => undefined);
  const folder = await executorDiskFolder(executorId);
  if (folder) rmSync(folder, { recursive: true, force: true });
}

const REMOVAL_PASSES = 5;
const REMOVALS_AT_ONCE = 16;

async function inBatches<T>(items: T[], work: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += REMOVALS_AT_ONCE) await Promise.all(items.slice(i, i + REMOVALS_AT_ONCE).map(work));
}

/** Where the engine keeps the executor's workspace disk images, seen from this host. */
export async function executorDiskFolder(executorId: string): Promise<string | undefined> {
  try {
    const info = await new Docker().getVolume(DISKS_VOLUME).inspect();
    return join(info.Mountpoint, executorId);
  } catch {
    return undefined;
  }
}

/**
 * The executor's workspace disk images still on the host, and the loop devices still attached
 * to one: a test that ends the executor's sessions ends with none of either.
 */
export async function executorDisks(executorId: string): Promise<{ images: string[]; loopDevices: string[] }> {
  const folder = await executorDiskFolder(executorId);
  const images = folder && existsSync(folder) ? readdirSync(folder) : [];
  const loopDevices = readdirSync('/sys/block')
    .filter((dev) => dev.startsWith('loop') && backingFile(dev).includes(`/${executorId}/`))
    .map((dev) => `/dev/${dev}`);
  return { images, loopDevices };
}

/**
 * The image a loop device is attached to, or '' for a free one. Tests run side by side, so
 * a device can be detached between the listing of /sys/block and this read: only a bound
 * device has a `loop` folder, and one that lost it meanwhile is free.
 */
function backingFile(dev: string): string {
  try {
    return readFileSync(`/sys/block/${dev}/loop/backing_file`, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
}

/** Containers and volumes still labelled with the executor id: a test ends with none. */
export async function countExecutorResources(executorId: string): Promise<{ containers: number; volumes: number }> {
  const docker = new Docker();
  const filters = { label: [`runbox.executor=${executorId}`] };
  const containers = await docker.listContainers({ all: true, filters });
  const { Volumes } = await docker.listVolumes({ filters });
  return { containers: containers.length, volumes: (Volumes ?? []).length };
}

/** Polls `probe` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
