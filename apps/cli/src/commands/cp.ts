import { createHash } from 'node:crypto';
import { createWriteStream, openAsBlob } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { Command } from './command';

/** `SESSION:PATH`, the way `docker cp` names a container's file. */
const REMOTE = /^(ses_[A-Za-z0-9_-]+):(.*)$/;

interface Remote {
  session: string;
  path: string;
}

function parseRemote(arg: string): Remote | undefined {
  const match = REMOTE.exec(arg);
  if (!match) return undefined;
  return { session: match[1], path: match[2] || '.' };
}

export const cpCommand: Command = {
  name: 'cp',
  summary: "copy a file between this machine and a session's workspace (bytes as they are)",
  usage: ['runbox cp LOCAL SESSION:PATH     upload (PATH ending in / keeps the file name)', 'runbox cp SESSION:PATH LOCAL     download (- writes to stdout)'].join('\n       '),
  async run(ctx, _values, positionals) {
    if (positionals.length !== 2) throw new UsageError('cp takes a source and a destination');
    const [from, to] = positionals;
    const source = parseRemote(from);
    const target = parseRemote(to);
    if (source && target) throw new UsageError('cp copies between this machine and a session, not between two sessions');
    if (!source && !target) throw new UsageError('one side of cp must be SESSION:PATH (e.g. ses_abc:notes/todo.md)');
    const rb = await ctx.client();
    if (target) {
      const info = await stat(from).catch(() => undefined);
      if (!info?.isFile()) throw new UsageError(`${from} is not a file`);
      const path = target.path.endsWith('/') || target.path === '.' ? join(target.path, basename(from)) : target.path;
      // A Blob of the file: streamed by fetch, and replayable if the upload has to be retried.
      const result = await rb.sessions.ref(target.session).files.write(path, await openAsBlob(from));
      if (ctx.flags.json) ctx.printJson({ ...result, path });
      else ctx.note(`${from} → ${target.session}:${path} (${result.size} bytes, sha256 ${result.sha256})`);
      return EXIT.ok;
    }
    const remote = source!;
    const stream = await rb.sessions.ref(remote.session).files.readStream(remote.path);
    const hash = createHash('sha256');
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    });
    const body = Readable.fromWeb(stream as WebReadableStream<Uint8Array>);
    if (to === '-') {
      await pipeline(body, counter, ctx.io.stdout, { end: false });
      return EXIT.ok;
    }
    const local = (await stat(to).catch(() => undefined))?.isDirectory() ? join(to, basename(remote.path)) : to;
    // Written under a temporary name first, so a broken download never leaves half a file.
    const temp = join(dirname(local), `.${basename(local)}.runbox-${process.pid}.part`);
    try {
      await pipeline(body, counter, createWriteStream(temp));
      await rename(temp, local);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    const summary = { path: local, size, sha256: hash.digest('hex') };
    if (ctx.flags.json) ctx.printJson(summary);
    else ctx.note(`${remote.session}:${remote.path} → ${local} (${size} bytes, sha256 ${summary.sha256})`);
    return EXIT.ok;
  },
};
