import type { Logger } from 'pino';

/**
 * Size-limited workspace volumes. Each workspace is an ext4 filesystem in a sparse image file
 * of `RUNBOX_SANDBOX_DISK_MB`, attached to a loop device and mounted by the Docker engine
 * itself (a `local`-driver volume with `type=ext4` and `device=/dev/loopN`). The kernel
 * enforces the size: a write past it fails with ENOSPC inside the sandbox, and the host loses
 * at most the image's size. Everything goes through the Docker engine (see EngineDiskImages),
 * so it works the same with a local engine and a privileged engine sidecar on Kubernetes.
 */

/** The label that marks a workspace volume backed by a disk image (its value: the size in MiB). */
export const DISK_LABEL = 'runbox.disk-mb';

/** The mount options of every workspace filesystem. `discard` hands deleted blocks back to the host. */
export const WORKSPACE_MOUNT_OPTIONS = 'nodev,nosuid,noatime,discard';

/** What WorkspaceVolumes needs of Docker's volume API. */
export interface VolumeStore {
  /** The volume's labels and driver options, or undefined when it does not exist. */
  inspect(name: string): Promise<{ labels: Record<string, string>; options: Record<string, string> } | undefined>;
  create(name: string, labels: Record<string, string>, options: Record<string, string>): Promise<void>;
  /** Removes the volume; a missing one is not an error, one still mounted is. */
  remove(name: string): Promise<void>;
  /** Names of the volumes this executor owns. */
  listOwned(): Promise<string[]>;
}

/** The disk images behind the volumes, one per volume name, and their loop devices. */
export interface DiskImages {
  /** A new formatted image of `sizeMb`, attached to a loop device; returns the device. */
  make(volume: string, sizeMb: number): Promise<string>;
  /** The loop device the volume's image is attached to now, attaching it if it is not. */
  attach(volume: string): Promise<string>;
  /** Detaches the image from every loop device and deletes it; a missing one is not an error. */
  destroy(volume: string): Promise<void>;
  /** The volume names that have an image. */
  list(): Promise<string[]>;
  /** Names of the containers doing this work right now, if it takes any. */
  helpersAtWork(): ReadonlySet<string>;
}

export class WorkspaceDiskError extends Error {}

export class WorkspaceVolumes {
  /** Volumes whose image exists or may exist while their Docker volume does not yet. */
  private readonly preparing = new Set<string>();

  constructor(
    private readonly volumes: VolumeStore,
    private readonly images: DiskImages,
    readonly sizeMb: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Makes the volume ready to mount: a new size-limited disk when it does not exist, or, for
   * a kept workspace, its disk attached again. A loop device is a kernel object: after a
   * host reboot (or anyone detaching it) the number recorded in the volume may be free or,
   * worse, another workspace's. So the volume is checked against the device its image is
   * attached to right now, and made again with that device when they differ.
   */
  async prepare(name: string, labels: Record<string, string>): Promise<void> {
    this.preparing.add(name);
    try {
      const existing = await this.volumes.inspect(name);
      if (!existing) return await this.createNew(name, labels);
      if (existing.labels[DISK_LABEL] === undefined) {
        // Made while the limit was off (RUNBOX_SANDBOX_DISK_MB=0): its files stay where they are.
        this.logger.warn({ volume: name }, 'this workspace was made without a disk limit and keeps having none');
        return;
      }
      const device = await this.images.attach(name).catch((err: unknown) => {
        throw new WorkspaceDiskError(`could not attach the disk of workspace ${name}: ${messageOf(err)}`);
      });
      if (existing.options.device === device) return;
      this.logger.info({ volume: name, was: existing.options.device, now: device }, 'workspace disk is on another loop device now; re-making its volume');
      await this.volumes.remove(name);
      await this.volumes.create(name, existing.labels, volumeOptions(device));
    } finally {
      this.preparing.delete(name);
    }
  }

  /** Helper containers at work for this process; anything else carrying the helper label is a leftover. */
  helpersAtWork(): ReadonlySet<string> {
    return this.images.helpersAtWork();
  }

  /** Removes the volume, then its image and loop device. */
  async remove(name: string): Promise<void> {
    const existing = await this.volumes.inspect(name);
    // Gone already: an image a crash left behind is the sweep's to remove.
    if (!existing) return;
    await this.volumes.remove(name);
    if (existing.labels[DISK_LABEL] !== undefined) await this.images.destroy(name);
  }

  /**
   * Removes images (and their loop devices) that no volume uses: what a crash between making
   * the image and the volume, or between removing them, left. Images are listed before the
   * volumes, so an image whose volume is made meanwhile is either seen with its volume or
   * is still being prepared.
   */
  async sweepImages(): Promise<number> {
    const images = await this.images.list();
    if (images.length === 0) return 0;
    const volumes = new Set(await this.volumes.listOwned());
    let removed = 0;
    for (const name of images) {
      if (volumes.has(name) || this.preparing.has(name)) continue;
      try {
        await this.images.destroy(name);
        removed++;
        this.logger.info({ volume: name }, 'sweep: removed a workspace disk image no volume uses');
      } catch (err) {
        this.logger.warn({ volume: name, err }, 'sweep: removing a workspace disk image failed; the next sweep retries');
      }
    }
    return removed;
  }

  private async createNew(name: string, labels: Record<string, string>): Promise<void> {
    let device: string;
    try {
      device = await this.images.make(name, this.sizeMb);
    } catch (err) {
      await this.images.destroy(name).catch(() => undefined);
      throw new WorkspaceDiskError(
        `could not make the ${this.sizeMb} MiB workspace disk: ${messageOf(err)}. The Docker engine must let a helper ` +
          'container use loop devices (docs/sandbox.md#workspace-size); RUNBOX_SANDBOX_DISK_MB=0 runs without a disk limit instead',
      );
    }
    try {
      await this.volumes.create(name, { ...labels, [DISK_LABEL]: String(this.sizeMb) }, volumeOptions(device));
    } catch (err) {
      await this.images.destroy(name).catch(() => undefined);
      throw err;
    }
  }
}

/** The `local` driver's options for an ext4 filesystem on `device`. */
export function volumeOptions(device: string): Record<string, string> {
  return { type: 'ext4', device, o: WORKSPACE_MOUNT_OPTIONS };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
