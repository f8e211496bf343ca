import pino from 'pino';
import { DISK_LABEL, DiskImages, VolumeStore, WorkspaceDiskError, WorkspaceVolumes, volumeOptions } from './workspace-volume';

type Volume = { labels: Record<string, string>; options: Record<string, string> };

/** Docker's volumes, in memory; `log` records every change in order. */
class FakeVolumes implements VolumeStore {
  readonly volumes = new Map<string, Volume>();
  readonly log: string[] = [];
  failCreate = false;
  async inspect(name: string): Promise<Volume | undefined> {
    return this.volumes.get(name);
  }
  async create(name: string, labels: Record<string, string>, options: Record<string, string>): Promise<void> {
    if (this.failCreate) throw new Error('engine said no');
    this.log.push(`create ${name} ${options.device}`);
    this.volumes.set(name, { labels, options });
  }
  async remove(name: string): Promise<void> {
    this.log.push(`remove ${name}`);
    this.volumes.delete(name);
  }
  async listOwned(): Promise<string[]> {
    return [...this.volumes.keys()];
  }
}

/** Disk images and the loop device each is attached to right now (null: detached). */
class FakeImages implements DiskImages {
  readonly attachedTo = new Map<string, string | null>();
  readonly log: string[] = [];
  private next = 0;
  failMake?: Error;
  /** While set, make() waits for it after the image exists: the helper is still running. */
  makeGate?: Promise<void>;
  async make(volume: string, sizeMb: number): Promise<string> {
    this.log.push(`make ${volume} ${sizeMb}`);
    if (this.failMake) throw this.failMake;
    const device = `/dev/loop${this.next++}`;
    this.attachedTo.set(volume, device);
    await this.makeGate;
    return device;
  }
  async attach(volume: string): Promise<string> {
    if (!this.attachedTo.has(volume)) throw new Error('the disk image is missing');
    const device = this.attachedTo.get(volume) ?? `/dev/loop${this.next++}`;
    this.attachedTo.set(volume, device);
    return device;
  }
  async destroy(volume: string): Promise<void> {
    this.log.push(`destroy ${volume}`);
    this.attachedTo.delete(volume);
  }
  async list(): Promise<string[]> {
    return [...this.attachedTo.keys()];
  }
  helpersAtWork(): ReadonlySet<string> {
    return new Set();
  }
}

const LABELS = { 'runbox.managed': 'true', 'runbox.session': 'ses_1' };

describe('WorkspaceVolumes', () => {
  let volumes: FakeVolumes;
  let images: FakeImages;
  let workspaces: WorkspaceVolumes;

  beforeEach(() => {
    volumes = new FakeVolumes();
    images = new FakeImages();
    workspaces = new WorkspaceVolumes(volumes, images, 64, pino({ level: 'silent' }));
  });

  it('makes a new workspace as an ext4 volume on the loop device of a disk image of the limit', async () => {
    await workspaces.prepare('ws-a', LABELS);
    expect(images.log).toEqual(['make ws-a 64']);
    expect(volumes.volumes.get('ws-a')).toEqual({
      labels: { ...LABELS, [DISK_LABEL]: '64' },
      options: { type: 'ext4', device: '/dev/loop0', o: 'nodev,nosuid,noatime,discard' },
    });
  });

  it('mounts a kept workspace on the same device while its image is still attached to it', async () => {
    await workspaces.prepare('ws-a', LABELS);
    await workspaces.prepare('ws-a', LABELS);
    expect(volumes.log).toEqual(['create ws-a /dev/loop0']);
    expect(images.log).toEqual(['make ws-a 64']);
  });

  it('re-makes the volume on the device its image is attached to now, never the recorded one', async () => {
    await workspaces.prepare('ws-a', LABELS);
    // A host reboot: every loop device is gone, and /dev/loop0 now carries another workspace.
    images.attachedTo.set('ws-a', null);
    await workspaces.prepare('ws-b', LABELS);
    images.attachedTo.set('ws-b', '/dev/loop0');
    await workspaces.prepare('ws-a', LABELS);
    expect(volumes.volumes.get('ws-a')?.options.device).toBe('/dev/loop2');
    expect(volumes.volumes.get('ws-a')?.labels[DISK_LABEL]).toBe('64');
    expect(volumes.log.slice(-2)).toEqual(['remove ws-a', 'create ws-a /dev/loop2']);
  });

  it('refuses a kept workspace whose image is gone instead of mounting whatever the device holds', async () => {
    await workspaces.prepare('ws-a', LABELS);
    images.attachedTo.delete('ws-a');
    await expect(workspaces.prepare('ws-a', LABELS)).rejects.toThrow(/could not attach the disk of workspace ws-a: the disk image is missing/);
    expect(volumes.log).toEqual(['create ws-a /dev/loop0']);
  });

  it('leaves a workspace made while the limit was off as it is', async () => {
    volumes.volumes.set('plain', { labels: LABELS, options: {} });
    await workspaces.prepare('plain', LABELS);
    expect(images.log).toEqual([]);
    expect(volumes.log).toEqual([]);
  });

  it('fails loud, naming the way out, when the engine cannot make the disk, and leaves no image', async () => {
    images.failMake = new Error('the disk helper (make) failed with 1: losetup: /dev/loop-control: Operation not permitted');
    const failure = workspaces.prepare('ws-a', LABELS);
    await expect(failure).rejects.toBeInstanceOf(WorkspaceDiskError);
    await expect(failure).rejects.toThrow(/64 MiB workspace disk: .*Operation not permitted.*loop devices.*RUNBOX_SANDBOX_DISK_MB=0/);
    expect(images.log).toEqual(['make ws-a 64', 'destroy ws-a']);
    expect(volumes.volumes.size).toBe(0);
  });

  it('removes the image when the volume cannot be made on it', async () => {
    volumes.failCreate = true;
    await expect(workspaces.prepare('ws-a', LABELS)).rejects.toThrow('engine said no');
    expect(images.attachedTo.has('ws-a')).toBe(false);
  });

  it('removes the volume first, then its image', async () => {
    await workspaces.prepare('ws-a', LABELS);
    await workspaces.remove('ws-a');
    expect(volumes.volumes.has('ws-a')).toBe(false);
    expect(images.log).toEqual(['make ws-a 64', 'destroy ws-a']);
  });

  it('removes a plain volume without looking for an image', async () => {
    volumes.volumes.set('plain', { labels: LABELS, options: {} });
    await workspaces.remove('plain');
    expect(volumes.volumes.has('plain')).toBe(false);
    expect(images.log).toEqual([]);
  });

  it('sweeps images no volume uses, and keeps those of volumes and of one being prepared', async () => {
    await workspaces.prepare('kept', LABELS);
    images.attachedTo.set('orphan', '/dev/loop7');
    let finishMake!: () => void;
    images.makeGate = new Promise((resolve) => (finishMake = resolve));
    // A new workspace whose image exists while its volume does not yet.
    const preparing = workspaces.prepare('new', LABELS);
    await new Promise((resolve) => setImmediate(resolve));
    expect(images.attachedTo.has('new')).toBe(true);
    expect(await workspaces.sweepImages()).toBe(1);
    finishMake();
    await preparing;
    expect([...images.attachedTo.keys()].sort()).toEqual(['kept', 'new']);
    expect(volumes.volumes.has('new')).toBe(true);
  });

  it('gives the volume options the local driver mounts an ext4 device with', () => {
    expect(volumeOptions('/dev/loop3')).toEqual({ type: 'ext4', device: '/dev/loop3', o: 'nodev,nosuid,noatime,discard' });
  });
});
