import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { checkedImport, firstFileEntry, folderContents, packSingleFile, UploadRefusedError } from './workspace-tar';

type Entry = { name: string; type?: tar.Headers['type']; linkname?: string; body?: string; mode?: number; uid?: number };

async function makeTar(entries: Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (d: Buffer) => chunks.push(d));
  const ended = new Promise<void>((resolve) => pack.on('end', resolve));
  for (const e of entries) {
    const type = e.type ?? 'file';
    const header = { name: e.name, type, linkname: e.linkname, mode: e.mode ?? 0o644, uid: e.uid ?? 0, gid: 0 };
    await new Promise<void>((resolve, reject) => {
      if (type === 'file') pack.entry({ ...header, size: Buffer.byteLength(e.body ?? '') }, e.body ?? '', (err) => (err ? reject(err) : resolve()));
      else pack.entry(header, (err) => (err ? reject(err) : resolve()));
    });
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

async function readAll(stream: Readable): Promise<Array<{ header: tar.Headers; body: string }>> {
  const out: Array<{ header: tar.Headers; body: string }> = [];
  const extract = tar.extract();
  extract.on('entry', (header, s, next) => {
    let body = '';
    s.on('data', (d: Buffer) => (body += d.toString()));
    s.on('end', () => {
      out.push({ header, body });
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    extract.on('finish', resolve);
    extract.on('error', reject);
    stream.on('error', reject);
    stream.pipe(extract);
  });
  return out;
}

const limits = { maxBytes: 1000, maxEntries: 10 };

async function refusal(entries: Entry[], lim = limits): Promise<UploadRefusedError> {
  const checked = checkedImport(Readable.from([await makeTar(entries)]), lim);
  await expect(readAll(checked.tar)).rejects.toBeInstanceOf(UploadRefusedError);
  const refused = checked.refusal();
  if (!refused) throw new Error('no refusal recorded');
  return refused;
}

describe('checkedImport', () => {
  it('packs files, folders and inward links again, owned by the sandbox user, without setuid bits', async () => {
    const checked = checkedImport(
      Readable.from([
        await makeTar([
          { name: './', type: 'directory' },
          { name: './dir/', type: 'directory', mode: 0o755 },
          { name: './dir/a.sh', body: 'echo hi', mode: 0o4755, uid: 0 },
          { name: 'dir/link', type: 'symlink', linkname: 'a.sh' },
          { name: 'dir/hard', type: 'link', linkname: 'dir/a.sh' },
        ]),
      ]),
      limits,
    );
    const entries = await readAll(checked.tar);
    expect(entries.map((e) => [e.header.name, e.header.type])).toEqual([
      ['dir', 'directory'],
      ['dir/a.sh', 'file'],
      ['dir/link', 'symlink'],
      ['dir/hard', 'link'],
    ]);
    expect(entries[1]).toMatchObject({ body: 'echo hi', header: { uid: 1000, gid: 1000, mode: 0o755 } });
    expect(entries[2].header.linkname).toBe('a.sh');
    expect(checked.entries()).toBe(4);
    expect(checked.refusal()).toBeUndefined();
  });

  it.each<[string, Entry[], string]>([
    ['a .. entry', [{ name: 'a/../../x', body: 'x' }], 'path_outside_workspace'],
    ['an absolute entry', [{ name: '/etc/x', body: 'x' }], 'path_outside_workspace'],
    ['an absolute symlink', [{ name: 'l', type: 'symlink', linkname: '/etc' }], 'path_outside_workspace'],
    ['a symlink out of the folder', [{ name: 'd/l', type: 'symlink', linkname: '../../x' }], 'path_outside_workspace'],
    ['an entry under a symlink of the archive', [{ name: 'l', type: 'symlink', linkname: 'd' }, { name: 'l/x', body: 'x' }], 'path_outside_workspace'],
    ['a hard link to no earlier file', [{ name: 'h', type: 'link', linkname: 'etc/passwd' }], 'path_outside_workspace'],
    ['a character device', [{ name: 'null', type: 'character-device' }], 'invalid_entry'],
    ['a FIFO', [{ name: 'pipe', type: 'fifo' }], 'invalid_entry'],
  ])('refuses %s', async (_what, entries, reason) => {
    expect((await refusal(entries)).reason).toBe(reason);
  });

  it('declares the folders an archive leaves implicit, so Docker does not make them as root', async () => {
    const checked = checkedImport(Readable.from([await makeTar([{ name: 'x/y/z.txt', body: 'z' }, { name: 'x/w.txt', body: 'w' }])]), limits);
    const entries = await readAll(checked.tar);
    expect(entries.map((e) => [e.header.name, e.header.type, e.header.uid])).toEqual([
      ['x', 'directory', 1000],
      ['x/y', 'directory', 1000],
      ['x/y/z.txt', 'file', 1000],
      ['x/w.txt', 'file', 1000],
    ]);
  });

  it('refuses more bytes or entries than the limits', async () => {
    expect((await refusal([{ name: 'a', body: 'x'.repeat(600) }, { name: 'b', body: 'x'.repeat(600) }])).reason).toBe('too_large');
    const many = Array.from({ length: 11 }, (_, i) => ({ name: `f${i}`, body: 'x' }));
    expect((await refusal(many)).reason).toBe('too_large');
  });

  it('refuses what is not a tar', async () => {
    const checked = checkedImport(Readable.from([Buffer.from('this is not a tar archive at all'.repeat(40))]), limits);
    await expect(readAll(checked.tar)).rejects.toBeInstanceOf(UploadRefusedError);
  });
});

describe('single files and folders', () => {
  it('wraps a body in one entry and reads it back, with its size and checksum', async () => {
    const { tar: packed, counter } = packSingleFile(Readable.from([Buffer.from('hello '), Buffer.from('world')]), 11);
    const entry = await firstFileEntry(packed);
    expect(entry.size).toBe(11);
    let text = '';
    for await (const d of entry.body) text += String(d);
    expect(text).toBe('hello world');
    expect(counter.hex()).toBe('b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9');
  });

  it('fails a body shorter than announced', async () => {
    const { tar: packed, refusal: refused } = packSingleFile(Readable.from([Buffer.from('short')]), 11);
    await expect(readAll(packed)).rejects.toThrow();
    expect(refused()?.reason).toBe('incomplete');
  });

  it('hands out a folder’s contents relative to it', async () => {
    const docker = await makeTar([
      { name: 'src/', type: 'directory' },
      { name: 'src/a.txt', body: 'A' },
      { name: 'src/sub/', type: 'directory' },
      { name: 'src/h', type: 'link', linkname: 'src/a.txt' },
    ]);
    const entries = await readAll(folderContents(Readable.from([docker])));
    expect(entries.map((e) => [e.header.name, e.header.type, e.header.linkname ?? null])).toEqual([
      ['a.txt', 'file', null],
      ['sub/', 'directory', null],
      ['h', 'link', 'a.txt'],
    ]);
  });
});
