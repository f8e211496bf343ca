import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { PassThrough, Readable, Transform, TransformCallback } from 'node:stream';
import * as tar from 'tar-stream';

/**
 * The tars the gateway makes and reads while bytes stream between HTTP and an executor.
 * Docker's archive API speaks tar; clients of the files API see raw bytes for one file and
 * a tar of a folder's contents (entries relative to the folder) for archives.
 */

/** Files land owned by the sandbox user, whatever the uploader's tar said. */
const SANDBOX_UID = 1000;
const SANDBOX_GID = 1000;
/** The name of a single-file upload's one entry, which the sandbox agent moves into place. */
export const UPLOAD_ENTRY = 'content';
/** Bytes a tar spends on each entry beyond its content, at most (a header, a pax header, padding). */
export const TAR_ENTRY_OVERHEAD = 3 * 512 + 512;

/** An upload the gateway refuses while it streams; nothing it carried is kept. */
export class UploadRefusedError extends Error {
  constructor(
    readonly reason: 'too_large' | 'path_outside_workspace' | 'invalid_entry' | 'invalid_tar' | 'incomplete',
    message: string,
  ) {
    super(message);
  }
}

/** Counts and hashes what passes; more bytes than announced fail the stream. */
export class Sha256Counter extends Transform {
  private readonly digest = createHash('sha256');
  bytes = 0;

  constructor(private readonly expected: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.expected) return done(new UploadRefusedError('incomplete', `more than the announced ${this.expected} bytes arrived`));
    this.digest.update(chunk);
    done(null, chunk);
  }

  hex(): string {
    return this.digest.digest('hex');
  }
}

/**
 * A one-entry tar around `body` (exactly `size` bytes). The returned counter says how many
 * bytes went in and their sha256; a body that ends short fails the tar.
 */
export function packSingleFile(body: Readable, size: number): { tar: Readable; counter: Sha256Counter; refusal: () => UploadRefusedError | undefined } {
  const pack = tar.pack();
  const counter = new Sha256Counter(size);
  let refused: UploadRefusedError | undefined;
  const fail = (err: Error) => {
    refused ??= err instanceof UploadRefusedError ? err : new UploadRefusedError('incomplete', `the upload was cut off: ${err.message}`);
    pack.destroy(refused);
  };
  const entry = pack.entry({ name: UPLOAD_ENTRY, size, mode: 0o644, uid: SANDBOX_UID, gid: SANDBOX_GID, type: 'file', mtime: new Date() }, (err) => {
    if (err) return fail(new UploadRefusedError('incomplete', `the body ended after ${counter.bytes} of ${size} bytes`));
    pack.finalize();
  });
  body.on('error', fail);
  body.on('aborted', () => fail(new Error('the client went away')));
  counter.on('error', fail);
  body.pipe(counter).pipe(entry);
  return { tar: endsOrFails(pack, () => refused ?? new UploadRefusedError('incomplete', 'the upload was cut off')), counter, refusal: () => refused };
}

/**
 * The packer's output, which fails rather than just stopping: tar-stream's packer closes
 * without an error when an entry comes out short, which a reader would take as a stall.
 */
function endsOrFails(pack: tar.Pack, why: () => Error): Readable {
  const out = new PassThrough();
  const source = pack as unknown as Readable;
  let ended = false;
  source.on('end', () => (ended = true));
  // The packer closes before it calls the entry's callback with the reason: wait a tick for it.
  source.on('close', () => process.nextTick(() => (ended ? undefined : out.destroy(why()))));
  // Errors reach the reader through `out`; until one listens (the offer), they must not throw.
  source.on('error', () => undefined);
  out.on('error', () => undefined);
  source.pipe(out);
  out.on('close', () => (ended ? undefined : pack.destroy()));
  return out;
}

/** The first entry of a tar: a regular file's header and its bytes as they stream. */
export function firstFileEntry(source: Readable): Promise<{ size: number; body: Readable }> {
  return new Promise((resolve, reject) => {
    const extract = tar.extract();
    let found = false;
    extract.on('entry', (header, stream, next) => {
      if (found) {
        stream.resume();
        return next();
      }
      found = true;
      if (header.type !== 'file' && header.type !== 'contiguous-file') {
        stream.resume();
        reject(new UploadRefusedError('invalid_entry', `expected a file, found a ${header.type}`));
        return next();
      }
      const body = new PassThrough({ highWaterMark: 64 * 1024 });
      stream.pipe(body);
      stream.on('end', () => next());
      resolve({ size: header.size ?? 0, body });
    });
    extract.on('error', (err: Error) => (found ? undefined : reject(err)));
    extract.on('finish', () => (found ? undefined : reject(new UploadRefusedError('invalid_tar', 'the archive held no file'))));
    source.on('error', (err: Error) => extract.destroy(err));
    source.pipe(extract);
  });
}

/**
 * Docker's tar of a folder (`name/`, `name/a.txt`, ...) as the files API hands it out: the
 * folder's contents, relative to it. Only files, folders, symlinks and hard links pass
 * (the link itself; nothing is followed).
 */
export function folderContents(source: Readable): Readable {
  const pack = tar.pack();
  const extract = tar.extract();
  const strip = (name: string) => name.split('/').slice(1).join('/');
  extract.on('entry', (header, stream, next) => {
    const name = strip(header.name);
    const keep = name !== '' && ['file', 'contiguous-file', 'directory', 'symlink', 'link'].includes(header.type ?? '');
    if (!keep) {
      stream.resume();
      stream.on('end', () => next());
      return;
    }
    const out = { ...header, name, ...(header.type === 'link' && header.linkname ? { linkname: strip(header.linkname) } : {}) };
    stream.pipe(pack.entry(out, (err) => (err ? extract.destroy(err) : next())));
  });
  extract.on('finish', () => pack.finalize());
  extract.on('error', (err: Error) => pack.destroy(err));
  source.on('error', (err: Error) => extract.destroy(err));
  (pack as unknown as Readable).on('close', () => source.destroy());
  source.pipe(extract);
  return pack as unknown as Readable;
}

export interface ImportLimits {
  /** Content bytes all entries may hold together. */
  maxBytes: number;
  maxEntries: number;
}

/**
 * A client's tar, checked entry by entry while it streams and packed again with names and
 * owners Runbox chose. Refused (the stream fails with UploadRefusedError, so nothing is
 * extracted): absolute names and `..`; devices, FIFOs and anything but files, folders and
 * links; symlinks whose target is absolute or leaves the imported folder; hard links to
 * anything but an earlier file of the same archive; entries under an earlier symlink; more
 * bytes or entries than the limits.
 */
export function checkedImport(source: Readable, limits: ImportLimits): { tar: Readable; refusal: () => UploadRefusedError | undefined; entries: () => number } {
  const pack = tar.pack();
  const extract = tar.extract();
  const files = new Set<string>();
  const symlinks = new Set<string>();
  const folders = new Set<string>();
  let bytes = 0;
  let count = 0;
  let kept = 0;
  let refused: UploadRefusedError | undefined;
  const refuse = (err: UploadRefusedError) => {
    refused ??= err;
    extract.destroy(err);
    pack.destroy(err);
  };
  extract.on('entry', (header, stream, next) => {
    try {
      const out = checkEntry(header, { files, symlinks });
      count++;
      bytes += header.size ?? 0;
      if (count > limits.maxEntries) throw new UploadRefusedError('too_large', `the archive has more than ${limits.maxEntries} entries`);
      if (bytes > limits.maxBytes) throw new UploadRefusedError('too_large', `the archive unpacks to more than ${limits.maxBytes} bytes`);
      if (!out) {
        stream.resume();
        stream.on('end', () => next());
        return;
      }
      kept++;
      // Folders the archive leaves implicit would be made by Docker as root, where the
      // sandbox user could not move or change what is in them: each is declared first.
      for (const dir of missingParents(out.name, folders)) pack.entry({ name: dir, type: 'directory', mode: 0o755, uid: SANDBOX_UID, gid: SANDBOX_GID, mtime: out.mtime });
      if (out.type === 'directory') folders.add(out.name);
      stream.pipe(pack.entry(out, (err) => (err ? refuse(new UploadRefusedError('invalid_tar', `entry ${out.name} is cut short`)) : next())));
    } catch (err) {
      stream.resume();
      refuse(err instanceof UploadRefusedError ? err : new UploadRefusedError('invalid_tar', String(err)));
    }
  });
  extract.on('finish', () => {
    if (!refused) pack.finalize();
  });
  extract.on('error', (err: Error) => refuse(err instanceof UploadRefusedError ? err : new UploadRefusedError('invalid_tar', `not a readable tar: ${err.message}`)));
  source.on('error', (err: Error) => refuse(new UploadRefusedError('incomplete', `the upload was cut off: ${err.message}`)));
  source.on('aborted', () => refuse(new UploadRefusedError('incomplete', 'the client went away')));
  source.pipe(extract);
  const why = () => refused ?? new UploadRefusedError('invalid_tar', 'the archive was cut short');
  return { tar: endsOrFails(pack, why), refusal: () => refused, entries: () => kept };
}

/** The folders above `name` not yet declared, outermost first (and now counted as declared). */
function missingParents(name: string, declared: Set<string>): string[] {
  const parts = name.split('/');
  const missing: string[] = [];
  for (let i = 1; i < parts.length; i++) {
    const dir = parts.slice(0, i).join('/');
    if (!declared.has(dir)) {
      declared.add(dir);
      missing.push(dir);
    }
  }
  return missing;
}

/** The header to store for one entry, null to skip it (the archive's own `./`), or a refusal. */
function checkEntry(header: tar.Headers, seen: { files: Set<string>; symlinks: Set<string> }): tar.Headers | null {
  const raw = header.name;
  const name = posix.normalize(raw).replace(/\/+$/, '').replace(/^(\.\/)+/, '');
  if (raw.startsWith('/') || raw.includes('\0')) throw new UploadRefusedError('path_outside_workspace', `entry ${JSON.stringify(raw)} has an absolute name`);
  if (raw.split('/').includes('..')) throw new UploadRefusedError('path_outside_workspace', `entry ${JSON.stringify(raw)} climbs out with '..'`);
  if (name === '.' || name === '') return null;
  if (Buffer.byteLength(name) > 4096) throw new UploadRefusedError('invalid_entry', `an entry's name is longer than 4096 bytes`);
  const parts = name.split('/');
  for (let i = 1; i < parts.length; i++) {
    const above = parts.slice(0, i).join('/');
    if (seen.symlinks.has(above)) throw new UploadRefusedError('path_outside_workspace', `entry ${name} lies under the archive's symlink ${above}`);
  }
  const base = { name, mode: (header.mode ?? 0o644) & 0o777, uid: SANDBOX_UID, gid: SANDBOX_GID, mtime: header.mtime ?? new Date() };
  switch (header.type) {
    case 'file':
    case 'contiguous-file':
      seen.files.add(name);
      return { ...base, type: 'file', size: header.size ?? 0 };
    case 'directory':
      return { ...base, type: 'directory', mode: base.mode | 0o700 };
    case 'symlink': {
      const target = header.linkname ?? '';
      if (target === '' || target.startsWith('/')) throw new UploadRefusedError('path_outside_workspace', `symlink ${name} -> ${target} points outside the folder`);
      const resolved = posix.normalize(posix.join(posix.dirname(name), target));
      if (resolved === '..' || resolved.startsWith('../')) throw new UploadRefusedError('path_outside_workspace', `symlink ${name} -> ${target} points outside the folder`);
      seen.symlinks.add(name);
      return { ...base, type: 'symlink', linkname: target };
    }
    case 'link': {
      const target = posix.normalize(header.linkname ?? '').replace(/^(\.\/)+/, '');
      if (!seen.files.has(target)) throw new UploadRefusedError('path_outside_workspace', `hard link ${name} -> ${header.linkname ?? ''} names no earlier file of the archive`);
      return { ...base, type: 'link', linkname: target };
    }
    case 'pax-header':
    case 'pax-global-header':
      return null;
    default:
      throw new UploadRefusedError('invalid_entry', `entry ${name} is a ${header.type ?? 'special file'}; only files, folders and links can be imported`);
  }
}
