import { VPS_TRANSFER_CAP_BYTES, VpsDownloadArgs, VpsUploadArgs } from '@app/contracts';
import { SavedServerConnections, ServerUseError } from '@app/ssh';
import { createHash, randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { Transform, TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Client, SFTPWrapper } from 'ssh2';
import { WorkspaceStreams, WorkspaceTransferError } from './workspace-streams';

export interface TransferOutcome {
  size: number;
  sha256: string;
  localPath: string;
  remotePath: string;
}

/** A transfer that did not happen; the message is safe for the model and says why. */
export class TransferFailedError extends Error {}

const CAP_TEXT = `${VPS_TRANSFER_CAP_BYTES / (1024 * 1024)} MiB`;

/**
 * vps_upload and vps_download: bytes stream between the session's workspace (through the
 * sandbox's transfer helper) and the saved server (SFTP), never whole in memory and never
 * over NATS. Each side writes to a temp file beside the destination and renames it only once
 * every byte arrived, so a transfer that fails leaves no partial file.
 */
export class VpsTransferService {
  constructor(
    private readonly connections: SavedServerConnections,
    private readonly workspace: WorkspaceStreams,
  ) {}

  async upload(tenantId: string, containerId: string, args: VpsUploadArgs, timeoutMs: number): Promise<TransferOutcome> {
    const server = await this.connections.byName(tenantId, args.server);
    return this.connections.withConnection(tenantId, server, ({ client }) =>
      withDeadline(timeoutMs, 'upload', async (onAbort) => {
        const source = await this.workspace.openRead(containerId, args.local_path, VPS_TRANSFER_CAP_BYTES).catch(workspaceFailure);
        onAbort(() => source.abort());
        const sftp = await openSftp(client);
        const temp = tempBeside(args.remote_path);
        const hash = new Hashing(source.size);
        try {
          onAbort(() => sftp.end());
          await pipeline(source.bytes, hash, sftp.createWriteStream(temp, { mode: 0o644 }));
          await source.finished.catch(workspaceFailure);
          if (hash.bytes !== source.size) throw new TransferFailedError(`${source.path} changed while it was read (${hash.bytes} of ${source.size} bytes)`);
          await renameOver(sftp, temp, args.remote_path);
          return { size: hash.bytes, sha256: hash.hex(), localPath: source.path, remotePath: args.remote_path };
        } catch (err) {
          await unlinkQuietly(sftp, temp);
          throw remoteFailure(err, server.name, args.remote_path);
        } finally {
          sftp.end();
        }
      }),
    );
  }

  async download(tenantId: string, containerId: string, args: VpsDownloadArgs, timeoutMs: number): Promise<TransferOutcome> {
    const server = await this.connections.byName(tenantId, args.server);
    return this.connections.withConnection(tenantId, server, ({ client }) =>
      withDeadline(timeoutMs, 'download', async (onAbort) => {
        const sftp = await openSftp(client);
        onAbort(() => sftp.end());
        try {
          const stats = await new Promise<{ size: number; isFile(): boolean }>((resolve, reject) => sftp.stat(args.remote_path, (err, s) => (err ? reject(err) : resolve(s))));
          if (!stats.isFile()) throw new TransferFailedError(`${server.name}:${args.remote_path} is not a regular file`);
          if (stats.size > VPS_TRANSFER_CAP_BYTES) {
            throw new TransferFailedError(`${server.name}:${args.remote_path} is ${stats.size} bytes, over the ${CAP_TEXT} (${VPS_TRANSFER_CAP_BYTES} bytes) transfer cap`);
          }
          const sink = await this.workspace.openWrite(containerId, args.local_path, stats.size).catch(workspaceFailure);
          onAbort(() => sink.abort());
          const hash = new Hashing(stats.size);
          const source = sftp.createReadStream(args.remote_path);
          const copy = pipeline(source, hash, sink.bytes);
          copy.catch(() => undefined);
          // The helper accepted the path (openWrite waits for that), but may still fail
          // part-way (the workspace disk full): its answer ends the copy rather than a
          // stalled write into its closed stdin.
          const refused = sink.finished.then(
            () => copy,
            (err: unknown) => Promise.reject(err),
          );
          try {
            await Promise.race([copy, refused]);
          } catch (err) {
            // Whichever failed first says why. The helper sees a short stream and removes its temp file.
            source.destroy();
            sink.abort();
            await sink.finished.catch(() => undefined);
            throw err;
          }
          const written = await sink.finished.catch(workspaceFailure);
          if (written.sha256 !== hash.hex()) throw new TransferFailedError('the workspace received different bytes than were read from the server');
          return { size: written.size, sha256: written.sha256, localPath: written.path, remotePath: args.remote_path };
        } catch (err) {
          if (err instanceof WorkspaceTransferError) workspaceFailure(err);
          throw remoteFailure(err, server.name, args.remote_path);
        } finally {
          sftp.end();
        }
      }),
    );
  }
}

/** Counts and hashes the bytes going through; more than `expected` fails the pipeline. */
class Hashing extends Transform {
  private readonly digest = createHash('sha256');
  bytes = 0;

  constructor(private readonly expected: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.expected) return done(new TransferFailedError(`the file grew past its announced ${this.expected} bytes while it was read`));
    this.digest.update(chunk);
    done(null, chunk);
  }

  hex(): string {
    return this.digest.digest('hex');
  }
}

function openSftp(client: Client): Promise<SFTPWrapper> {
  return new Promise((resolve, reject) => client.sftp((err, sftp) => (err ? reject(new TransferFailedError(`the server refused an SFTP session: ${err.message}`)) : resolve(sftp))));
}

function tempBeside(remotePath: string): string {
  const dir = posix.dirname(remotePath);
  const name = `.${posix.basename(remotePath).slice(0, 40)}.runbox-${randomBytes(4).toString('hex')}.part`;
  return dir === '.' ? name : posix.join(dir, name);
}

/** posix-rename@openssh.com replaces an existing file atomically; plain SFTP rename refuses to. */
function renameOver(sftp: SFTPWrapper, from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    try {
      sftp.ext_openssh_rename(from, to, (err) => (err ? reject(err) : resolve()));
    } catch {
      sftp.rename(from, to, (err) => (err ? reject(err) : resolve()));
    }
  });
}

function unlinkQuietly(sftp: SFTPWrapper, path: string): Promise<void> {
  return new Promise((resolve) => {
    try {
      sftp.unlink(path, () => resolve());
    } catch {
      resolve();
    }
  });
}

function workspaceFailure(err: unknown): never {
  if (err instanceof WorkspaceTransferError) throw new TransferFailedError(err.code === 'too_large' ? `${err.message} (${CAP_TEXT})` : err.message);
  throw err;
}

function remoteFailure(err: unknown, server: string, path: string): Error {
  if (err instanceof TransferFailedError || err instanceof ServerUseError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TransferFailedError(`the transfer with ${server}:${path} failed: ${message}`);
}

/** Runs `work` with a deadline; at it, every abort hook runs and the transfer fails. */
async function withDeadline<T>(ms: number, what: string, work: (onAbort: (hook: () => void) => void) => Promise<T>): Promise<T> {
  const hooks: Array<() => void> = [];
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      for (const hook of hooks) hook();
      reject(new TransferFailedError(`the ${what} did not finish within ${Math.round(ms / 1000)} s and was stopped; no partial file was left`));
    }, ms);
  });
  try {
    return await Promise.race([work((hook) => hooks.push(hook)), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
