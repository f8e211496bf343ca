import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { Logger } from 'pino';
import { BatchingQueue } from './batching-queue';
import { LABEL } from './sandbox-labels';
import { SANDBOX_USER } from './sandbox-policy';
import { DiskImages, VolumeStore, WorkspaceVolumes } from './workspace-volume';

/** The Docker volume that holds every executor's disk images, one folder per executor. */
export const DISKS_VOLUME = 'runbox-disks';
/** Marks the short-lived helper containers that make and remove disk images. */
export const DISK_HELPER_LABEL = 'runbox.disk-helper';

const HELPER_TIMEOUT_MS = 60_000;
const HELPER_OUTPUT_LIMIT = 16 * 1024;
/**
 * Helpers making disks at once, and the most disks one of them makes. A burst of new
 * workspaces (32 sessions at once, a warm pool growing) then costs a few helper containers
 * instead of one each: a container's create, start and removal cost the engine far more
 * than formatting one sparse image does.
 */
const MAKERS = 2;
const DISKS_PER_MAKER = 16;
/** A Docker volume name, and what an executor's folder may be called: nothing a shell or a path could misread. */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * Size-limited workspaces on this Docker engine, or undefined when the operator turned the
 * limit off (`RUNBOX_SANDBOX_DISK_MB=0`): then a workspace is a plain volume on the engine's
 * filesystem, as large as that filesystem lets it grow.
 */
export function workspaceVolumesOn(
  docker: Docker,
  settings: { image: string; executorId: string; sizeMb: number },
  logger: Logger,
): WorkspaceVolumes | undefined {
  if (settings.sizeMb === 0) {
    logger.warn('RUNBOX_SANDBOX_DISK_MB=0: sandbox workspaces have no size limit; one session can fill the Docker host\'s disk');
    return undefined;
  }
  const ownLabels = [`${LABEL.managed}=true`, `${LABEL.executor}=${settings.executorId}`];
  return new WorkspaceVolumes(
    new DockerVolumeStore(docker, ownLabels),
    new EngineDiskImages(docker, settings.image, settings.executorId, SANDBOX_USER),
    settings.sizeMb,
    logger,
  );
}

/**
 * The helper's whole program: fixed here, with names passed as positional parameters, never
 * spliced into the text. `$1` op, `$2` the executor's folder, then for `make`: `$3` MiB,
 * `$4` owner and the volumes (one line `VOLUME DEVICE` each); for the others `$3` the volume.
 *
 * The helper's /dev has no loop device nodes (only /dev/loop-control is passed in), and a
 * loop device the kernel creates on demand (`losetup -f` asks loop-control for one) would
 * not appear in it anyway: the nodes are made from /sys, first for every device bound to an
 * image (only a bound device has a `loop` folder in /sys), since `losetup -j` finds an image's
 * devices by opening them. A host keeps every loop device it ever made, bound or not, so
 * making nodes for all of them cost each helper two processes per device in the host's
 * history (about a second after 500 sessions). Two helpers may pick the same free device;
 * the loser's attach fails with EBUSY and it picks again.
 *
 * A detach is deferred while anything else holds the device open, and other helpers'
 * `losetup -j` open every bound device for a moment: the kernel then only marks the device
 * to clear on its last close. So detach waits (up to 5 s) for the image to be free before the
 * image file is removed, rather than taking a device still bound for a failure.
 */
const HELPER_SCRIPT = `
set -eu
op=$1; dir=/disks/$2; img=$dir/\${3:-none}.img
node() {
  [ -b "$1" ] && return 0
  read -r mm < "/sys/block/\${1#/dev/}/dev"
  mknod "$1" b "\${mm%:*}" "\${mm#*:}" 2>/dev/null || [ -b "$1" ]
}
for sys in /sys/block/loop*; do if [ -e "$sys/loop" ]; then node "/dev/\${sys##*/}"; fi; done
attached() { losetup -j "$img" | cut -d: -f1; }
attach() {
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    dev=$(losetup -f)
    node "$dev"
    if losetup "$dev" "$img" 2>/dev/null; then echo "$dev"; return 0; fi
  done
  echo "no loop device could be attached" >&2
  return 1
}
detach() {
  for _ in $(seq 50); do
    for dev in $(attached); do losetup -d "$dev" 2>/dev/null || true; done
    [ -n "$(attached)" ] || return 0
    sleep 0.1
  done
  echo "the image is still attached: $(attached)" >&2
  return 1
}
case "$op" in
  make)
    mkdir -p "$dir"
    size=$3; owner=$4; shift 4
    for volume in "$@"; do
      img=$dir/$volume.img
      if [ -e "$img" ]; then detach; rm -f "$img"; fi
      truncate -s "\${size}M" "$img"
      # No reserved blocks: the sandbox user gets the whole size. One inode per 8 KiB: a
      # workspace holds many small files (a node_modules folder). The journal is not zeroed:
      # the new file's holes read as zeros already, and writing them would cost the host 64 MiB.
      mkfs.ext4 -q -F -m 0 -i 8192 -E "root_owner=$owner,lazy_journal_init=1" "$img"
      # An empty root, so the workspace starts as empty as a plain volume would.
      debugfs -w -R 'rmdir lost+found' "$img" >/dev/null 2>&1 || true
      dev=$(attach)
      echo "$volume $dev"
    done
    ;;
  attach)
    [ -e "$img" ] || { echo "the disk image is missing" >&2; exit 3; }
    dev=$(attached | head -n 1)
    if [ -n "$dev" ]; then echo "$dev"; else attach; fi
    ;;
  destroy)
    [ -e "$img" ] || exit 0
    detach
    rm -f "$img"
    ;;
  list)
    [ -d "$dir" ] || exit 0
    for f in "$dir"/*.img; do if [ -e "$f" ]; then basename "$f" .img; fi; done
    ;;
esac
`;

/**
 * Disk images made and removed by a short-lived helper container through the Docker engine
 * (the sandbox image, which carries losetup and mkfs.ext4), so the executor needs no
 * privileges of its own and may talk to a sidecar engine. The helper runs as root with access
 * to the loop devices; it runs only HELPER_SCRIPT, never anything of a tenant's, with no network.
 */
export class EngineDiskImages implements DiskImages {
  /** Helper containers this process made and has not removed yet. */
  private readonly atWork = new Set<string>();
  private readonly makes = new BatchingQueue<{ volume: string; sizeMb: number }, string>((disks) => this.makeAll(disks), {
    concurrency: MAKERS,
    maxBatch: DISKS_PER_MAKER,
    kindOf: (disk) => String(disk.sizeMb),
  });

  constructor(
    private readonly docker: Docker,
    private readonly image: string,
    private readonly executorId: string,
    /** Owner (uid:gid) of each workspace's root directory. */
    private readonly owner: string,
  ) {
    safe(executorId, 'executor id');
  }

  /** Made by the next free helper, together with the other disks asked for meanwhile. */
  make(volume: string, sizeMb: number): Promise<string> {
    return this.makes.run({ volume: safe(volume, 'volume'), sizeMb });
  }

  private async makeAll(disks: Array<{ volume: string; sizeMb: number }>): Promise<string[]> {
    const output = await this.run('make', String(disks[0].sizeMb), this.owner, ...disks.map((d) => d.volume));
    const devices = new Map(
      output
        .split('\n')
        .map((line) => line.trim().split(' '))
        .filter((fields) => fields.length === 2)
        .map(([volume, dev]) => [volume, dev]),
    );
    return disks.map((d) => device(devices.get(d.volume) ?? ''));
  }

  async attach(volume: string): Promise<string> {
    return device(await this.run('attach', safe(volume, 'volume')));
  }

  async destroy(volume: string): Promise<void> {
    await this.run('destroy', safe(volume, 'volume'));
  }

  async list(): Promise<string[]> {
    return (await this.run('list', 'none')).split('\n').filter((name) => SAFE_NAME.test(name));
  }

  helpersAtWork(): ReadonlySet<string> {
    return this.atWork;
  }

  /** Runs the helper to its end and returns its standard output; a non-zero exit throws with its error output. */
  private async run(op: string, ...args: string[]): Promise<string> {
    // Known to the sweep from before it exists until after it is gone: the sweep removes
    // only helpers no one is waiting for (those of an executor that stopped mid-way).
    const name = `runbox-disk-${randomBytes(6).toString('hex')}`;
    this.atWork.add(name);
    try {
      return await this.runAs(name, op, args);
    } finally {
      this.atWork.delete(name);
    }
  }

  private async runAs(name: string, op: string, args: string[]): Promise<string> {
    const container = await this.docker.createContainer({
      name,
      Image: this.image,
      User: '0:0',
      Cmd: ['sh', '-c', HELPER_SCRIPT, 'runbox-disk', op, this.executorId, ...args],
      // Labelled like every container the executor makes, so the sweep removes one a crash left.
      Labels: { [LABEL.managed]: 'true', [LABEL.executor]: this.executorId, [DISK_HELPER_LABEL]: 'true' },
      NetworkDisabled: true,
      HostConfig: {
        // Root with one capability: MKNOD, for a loop device node made after the start. The
        // device cgroup lets it reach loop-control and the loop block devices (major 7), and
        // nothing else; the loop ioctls need no capability of their own.
        CapDrop: ['ALL'],
        CapAdd: ['MKNOD'],
        SecurityOpt: ['no-new-privileges'],
        Devices: [{ PathOnHost: '/dev/loop-control', PathInContainer: '/dev/loop-control', CgroupPermissions: 'rwm' }],
        DeviceCgroupRules: ['b 7:* rwm'],
        NetworkMode: 'none',
        ReadonlyRootfs: true,
        Memory: 256 * 1024 * 1024,
        PidsLimit: 64,
        Mounts: [{ Type: 'volume', Source: DISKS_VOLUME, Target: '/disks', VolumeOptions: { NoCopy: true, Labels: { 'runbox.disks': 'true' }, DriverConfig: { Name: 'local', Options: {} } } }],
      },
    });
    const stdout = new BoundedText(HELPER_OUTPUT_LIMIT);
    const stderr = new BoundedText(HELPER_OUTPUT_LIMIT);
    let timer: NodeJS.Timeout | undefined;
    try {
      // Attached before the start, so not a byte of its output is missed.
      const stream = await container.attach({ stream: true, stdout: true, stderr: true });
      const ended = new Promise<void>((resolve) => {
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', () => resolve());
      });
      const out = new PassThrough();
      const err = new PassThrough();
      out.on('data', (chunk: Buffer) => stdout.add(chunk));
      err.on('data', (chunk: Buffer) => stderr.add(chunk));
      this.docker.modem.demuxStream(stream, out, err);
      await container.start();
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the disk helper (${op}) did not finish within ${HELPER_TIMEOUT_MS / 1000} s`)), HELPER_TIMEOUT_MS);
      });
      // Waits for "not running": answers at once for a helper that has already ended.
      const { StatusCode } = (await Promise.race([container.wait(), timedOut])) as { StatusCode: number };
      await Promise.race([ended, timedOut]);
      if (StatusCode !== 0) throw new Error(`the disk helper (${op}) failed with ${StatusCode}: ${stderr.text().trim() || 'no message'}`);
      return stdout.text();
    } finally {
      clearTimeout(timer);
      // Also ends one that ran out of time.
      await container.remove({ force: true }).catch(() => undefined);
    }
  }
}

/** Workspace volumes through Docker's volume API, with the `local` driver. */
export class DockerVolumeStore implements VolumeStore {
  constructor(
    private readonly docker: Docker,
    private readonly ownLabels: string[],
  ) {}

  async inspect(name: string): Promise<{ labels: Record<string, string>; options: Record<string, string> } | undefined> {
    try {
      const info = await this.docker.getVolume(name).inspect();
      return { labels: info.Labels ?? {}, options: info.Options ?? {} };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async create(name: string, labels: Record<string, string>, options: Record<string, string>): Promise<void> {
    await this.docker.createVolume({ Name: name, Driver: 'local', DriverOpts: options, Labels: labels });
  }

  async remove(name: string): Promise<void> {
    try {
      await this.docker.getVolume(name).remove({ force: true });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }

  async listOwned(): Promise<string[]> {
    const res = await this.docker.listVolumes({ filters: { label: this.ownLabels } });
    return (res.Volumes ?? []).map((v) => v.Name);
  }
}

function safe(name: string, what: string): string {
  if (!SAFE_NAME.test(name)) throw new Error(`${what} ${JSON.stringify(name)} cannot name a disk image`);
  return name;
}

function device(output: string): string {
  const dev = output.trim().split('\n').pop() ?? '';
  if (!/^\/dev\/loop\d+$/.test(dev)) throw new Error(`the disk helper answered no loop device: ${JSON.stringify(output.slice(0, 200))}`);
  return dev;
}

/** Keeps the first `limit` bytes of a stream as text: a helper's output is small, and never trusted to be. */
class BoundedText {
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    if (this.size >= this.limit) return;
    const part = chunk.subarray(0, this.limit - this.size);
    this.chunks.push(part);
    this.size += part.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

function statusOf(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null ? (err as { statusCode?: number }).statusCode : undefined;
}
