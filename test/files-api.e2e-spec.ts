import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { TenantCredentials, TestStack } from './support/test-stack';

/** The cap for this file's stack: above the 20 MB round trip, low enough to go over cheaply. */
const CAP = 24 * 1024 * 1024;

type TarEntry = { name: string; type: string; size: number; linkname?: string; mode: number; sha256?: string };

/** Every entry of a tar, with a checksum of each file's bytes. */
async function readTar(bytes: Uint8Array): Promise<Map<string, TarEntry>> {
  const entries = new Map<string, TarEntry>();
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  extract.on('entry', (header, stream, next) => {
    const hash = createHash('sha256');
    stream.on('data', (d: Buffer) => hash.update(d));
    stream.on('end', () => {
      const type = header.type ?? 'file';
      entries.set(header.name.replace(/\/$/, ''), {
        name: header.name,
        type,
        size: header.size ?? 0,
        mode: (header.mode ?? 0) & 0o777,
        ...(header.linkname ? { linkname: header.linkname } : {}),
        ...(type === 'file' ? { sha256: hash.digest('hex') } : {}),
      });
      next();
    });
  });
  Readable.from([Buffer.from(bytes)]).pipe(extract);
  await done;
  return entries;
}

type NewEntry = { name: string; type?: tar.Headers['type']; linkname?: string; body?: Buffer; size?: number };

/** A tar made of the given entries (a `size` without a body announces bytes that follow as zeros). */
async function makeTar(entries: NewEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (d: Buffer) => chunks.push(d));
  const ended = new Promise<void>((resolve) => pack.on('end', resolve));
  for (const e of entries) {
    const type = e.type ?? 'file';
    if (type === 'file') {
      const body = e.body ?? Buffer.alloc(e.size ?? 0);
      await new Promise<void>((resolve, reject) => pack.entry({ name: e.name, type, size: body.length, mode: 0o644 }, body, (err) => (err ? reject(err) : resolve())));
    } else {
      await new Promise<void>((resolve, reject) => pack.entry({ name: e.name, type, linkname: e.linkname, mode: 0o755 }, (err) => (err ? reject(err) : resolve())));
    }
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/**
 * Workspace files over HTTP and the session list, through the real gateway, NATS, executor
 * and a hardened container: bytes stream as tars through Docker's archive API.
 */
describe('files API', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;
  let other: TenantCredentials;
  let sessionId: string;

  const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
  const url = (path: string) => `${stack.url}/v1/sessions/${sessionId}${path}`;
  const auth = (key = tenant.apiKey) => ({ authorization: `Bearer ${key}` });

  const put = (path: string, body: Uint8Array, key?: string) =>
    fetch(url(`/files/${path}`), { method: 'PUT', headers: { ...auth(key), 'content-type': 'application/octet-stream' }, body });
  const get = (path: string, key?: string) => fetch(url(`/files/${path}`), { headers: auth(key) });
  const exportTar = (query: string, key?: string) => fetch(url(`/archive${query}`), { headers: auth(key) });
  const importTar = (query: string, body: Uint8Array, key?: string) =>
    fetch(url(`/archive${query}`), { method: 'POST', headers: { ...auth(key), 'content-type': 'application/x-tar' }, body });
  /**
   * A request whose path goes out exactly as written: fetch would resolve `..` (and `%2E%2E`)
   * in the URL before sending, as every browser does, but other clients need not.
   */
  const raw = (method: string, path: string, body?: Buffer): Promise<Response> =>
    new Promise((resolve, reject) => {
      const target = new URL(stack.url);
      const req = httpRequest(
        { host: target.hostname, port: target.port, method, path: `/v1/sessions/${sessionId}/files/${path}`, headers: { ...auth(), ...(body ? { 'content-length': String(body.length) } : {}) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0 })));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const del = (path: string, query = '', key?: string) => fetch(url(`/files/${path}${query}`), { method: 'DELETE', headers: auth(key) });

  type ErrorBody = { error: { code: string; message: string; details?: Record<string, unknown> } };
  const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

  /** Runs a shell command in the sandbox, from the workspace, and returns its output (setup and checks from inside). */
  const sh = async (command: string): Promise<string> => {
    const args = { command: `cd /workspace && ${command}`, timeout_seconds: 60 };
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: args } });
    if (res.status !== 200 || !/^exit_code: 0$/m.test(res.body.output)) throw new Error(`command failed: ${command}\n${res.text}`);
    return res.body.output;
  };

  beforeAll(async () => {
    stack = new TestStack({ env: { RUNBOX_FILES_MAX_BYTES: String(CAP) } });
    await stack.start();
    tenant = await stack.createTenant();
    other = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  });

  afterAll(async () => {
    await stack?.stop();
  });

  describe('GET /v1/sessions', () => {
    it('lists the tenant’s live sessions newest first, a page at a time, as GET /v1/sessions/{id} shows each', async () => {
      const mine = await stack.createTenant();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await stack.request('POST', '/v1/sessions', { key: mine.apiKey, body: { metadata: { n: i } } })).body.id);
      await stack.request('POST', '/v1/sessions', { key: other.apiKey, body: {} });
      const first = await stack.request('GET', '/v1/sessions?limit=2', { key: mine.apiKey });
      expect(first.status).toBe(200);
      expect(first.body.data.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[1]]);
      const one = await stack.request('GET', `/v1/sessions/${ids[2]}`, { key: mine.apiKey });
      expect(first.body.data[0]).toEqual(one.body);
      expect(typeof first.body.next_cursor).toBe('string');
      const second = await stack.request('GET', `/v1/sessions?limit=2&cursor=${first.body.next_cursor}`, { key: mine.apiKey });
      expect(second.body.data.map((s: { id: string }) => s.id)).toEqual([ids[0]]);
      expect(second.body.next_cursor).toBeNull();
      // A deleted session leaves the list.
      expect((await stack.request('DELETE', `/v1/sessions/${ids[1]}`, { key: mine.apiKey })).status).toBe(204);
      const after = await stack.request('GET', '/v1/sessions', { key: mine.apiKey });
      expect(after.body.data.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[0]]);
      const bad = await stack.request('GET', '/v1/sessions?cursor=nonsense', { key: mine.apiKey });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('validation_failed');
    });
  });

  describe('single files', () => {
    it('takes a 20 MB binary file up and gives the same bytes back', async () => {
      const data = randomBytes(20 * 1024 * 1024);
      const up = await put('big/blob.bin', data);
      expect(up.status).toBe(200);
      expect(await up.json()).toEqual({ path: 'big/blob.bin', size: data.length, sha256: sha256(data) });
      // The sandbox sees the same bytes, owned by the sandbox user.
      expect(await sh('sha256sum big/blob.bin && stat -c %u:%s big/blob.bin')).toContain(`${sha256(data)}  big/blob.bin\n1000:${data.length}`);
      const down = await get('big/blob.bin');
      expect(down.status).toBe(200);
      expect(down.headers.get('content-type')).toBe('application/octet-stream');
      expect(down.headers.get('content-length')).toBe(String(data.length));
      expect(down.headers.get('x-content-type-options')).toBe('nosniff');
      const back = new Uint8Array(await down.arrayBuffer());
      expect(back.length).toBe(data.length);
      expect(sha256(back)).toBe(sha256(data));
    });

    it('answers a content type by extension, and active content as an attachment', async () => {
      expect((await put('web/page.html', Buffer.from('<script>alert(1)</script>'))).status).toBe(200);
      const page = await get('web/page.html');
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(page.headers.get('content-disposition')).toMatch(/^attachment; filename="page.html"/);
      expect(await page.text()).toBe('<script>alert(1)</script>');
      expect((await put('web/notes.json', Buffer.from('{"a":1}'))).status).toBe(200);
      const json = await get('web/notes.json');
      expect(json.headers.get('content-type')).toBe('application/json');
      expect(json.headers.get('content-disposition')).toBeNull();
    });

    it('overwrites, deletes, and answers 404 for what is not there and 409 for a folder', async () => {
      expect((await put('del/a.txt', Buffer.from('one'))).status).toBe(200);
      expect((await put('del/a.txt', Buffer.from('two!'))).status).toBe(200);
      expect(await (await get('del/a.txt')).text()).toBe('two!');
      const folder = await get('del');
      expect(folder.status).toBe(409);
      expect(await errorOf(folder)).toMatchObject({ code: 'conflict', details: { reason: 'is_a_directory' } });
      const noRecursive = await del('del');
      expect(noRecursive.status).toBe(409);
      expect((await del('del/a.txt')).status).toBe(200);
      const gone = await get('del/a.txt');
      expect(gone.status).toBe(404);
      expect((await errorOf(gone)).code).toBe('not_found');
      expect((await del('del/a.txt')).status).toBe(404);
      expect((await put('del/b/c.txt', Buffer.from('x'))).status).toBe(200);
      expect((await del('del', '?recursive=true')).status).toBe(200);
      expect((await get('del/b/c.txt')).status).toBe(404);
    });
  });
  describe('folders as tars', () => {
    it('exports a folder’s contents entry by entry, links as links, and imports them elsewhere', async () => {
      await sh(
        'mkdir -p arc/src/sub && printf A > arc/src/a.txt && chmod 750 arc/src/a.txt && head -c 300000 /dev/urandom > arc/src/sub/b.bin ' +
          '&& ln -s a.txt arc/src/link && ln -s /etc arc/src/outside',
      );
      const bSum = (await sh('sha256sum arc/src/sub/b.bin')).match(/([0-9a-f]{64}) {2}arc/)![1];
      const res = await exportTar('?path=arc/src');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-tar');
      const bytes = new Uint8Array(await res.arrayBuffer());
      const entries = await readTar(bytes);
      expect([...entries.keys()].sort()).toEqual(['a.txt', 'link', 'outside', 'sub', 'sub/b.bin']);
      expect(entries.get('a.txt')).toMatchObject({ type: 'file', size: 1, mode: 0o750, sha256: sha256(Buffer.from('A')) });
      expect(entries.get('sub')).toMatchObject({ type: 'directory' });
      expect(entries.get('sub/b.bin')).toMatchObject({ type: 'file', size: 300000, sha256: bSum });
      expect(entries.get('link')).toMatchObject({ type: 'symlink', linkname: 'a.txt' });
      // A link that leads out of the workspace is carried as the link, never what it points to.
      expect(entries.get('outside')).toMatchObject({ type: 'symlink', linkname: '/etc' });

      // The same archive, minus the outward link (which an import refuses), into a new folder.
      const inward = await makeTar([
        { name: 'a.txt', body: Buffer.from('A') },
        { name: 'sub', type: 'directory' },
        { name: 'sub/b.bin', body: Buffer.from(await (await get('arc/src/sub/b.bin')).arrayBuffer()) },
        { name: 'link', type: 'symlink', linkname: 'a.txt' },
      ]);
      const imported = await importTar('?path=arc/copy', inward);
      expect(imported.status).toBe(200);
      expect(await imported.json()).toEqual({ path: 'arc/copy', entries: 4 });
      const check = await sh('cd arc/copy && sha256sum sub/b.bin && readlink link && cat a.txt && echo && stat -c "%n %u" a.txt sub sub/b.bin');
      expect(check).toContain(`${bSum}  sub/b.bin`);
      expect(check).toContain('a.txt\nA\n');
      expect(check).toContain('a.txt 1000\nsub 1000\nsub/b.bin 1000');

      // Into a folder that exists, entries merge.
      const more = await importTar('?path=arc/copy', await makeTar([{ name: 'sub/c.txt', body: Buffer.from('C') }]));
      expect(more.status).toBe(200);
      expect(await sh('ls arc/copy/sub')).toContain('b.bin\nc.txt');

      // The whole workspace, when no path is given.
      const all = await readTar(new Uint8Array(await (await exportTar('')).arrayBuffer()));
      expect(all.get('arc/copy/sub/c.txt')).toMatchObject({ type: 'file', size: 1 });
    });

    it('answers 409 for a file where a folder is expected and 404 for a missing folder', async () => {
      expect((await put('arc-file.txt', Buffer.from('x'))).status).toBe(200);
      const file = await exportTar('?path=arc-file.txt');
      expect(file.status).toBe(409);
      expect(await errorOf(file)).toMatchObject({ code: 'conflict', details: { reason: 'not_a_directory' } });
      expect((await exportTar('?path=no-such-folder')).status).toBe(404);
      const into = await importTar('?path=arc-file.txt', await makeTar([{ name: 'a.txt', body: Buffer.from('A') }]));
      expect(into.status).toBe(409);
    });
  });

  describe('containment', () => {
    /** What the workspace holds at its top, hidden names included: no staging folder may be left. */
    const topLevel = async () =>
      (await sh("ls -A1 | sed 's/^/@ /'"))
        .split('\n')
        .filter((l) => l.startsWith('@ '))
        .map((l) => l.slice(2));

    beforeAll(async () => {
      await sh('mkdir -p esc && ln -sfn /etc esc/etc-link && ln -sfn /etc/passwd esc/pw && ln -sfn ../.. esc/up');
    });

    it('refuses paths that leave the workspace, by .., absolute path or a symlink pointing outside', async () => {
      const before = await topLevel();
      for (const path of ['../evil.txt', 'esc/../../evil.txt', '%2E%2E/evil.txt', '%2Fetc%2Fpasswd', 'esc/etc-link/passwd', 'esc/pw', 'esc/up/etc/passwd']) {
        const read = await raw('GET', path);
        expect([path, read.status]).toEqual([path, 400]);
        expect(await errorOf(read)).toMatchObject({ code: 'validation_failed', details: { reason: 'path_outside_workspace' } });
      }
      for (const path of ['../evil.txt', '%2E%2E/evil.txt', '%2Fetc%2Fevil.txt', 'esc/etc-link/evil.txt', 'esc/up/tmp/evil.txt', 'esc/pw']) {
        const write = await raw('PUT', path, Buffer.from('evil'));
        expect([path, write.status]).toEqual([path, 400]);
        expect((await errorOf(write)).details).toEqual({ reason: 'path_outside_workspace' });
      }
      expect((await exportTar('?path=esc/etc-link')).status).toBe(400);
      expect((await importTar('?path=esc/etc-link', await makeTar([{ name: 'evil.txt', body: Buffer.from('evil') }]))).status).toBe(400);
      expect((await del('%2Fetc%2Fpasswd')).status).toBe(400);
      // Nothing was written anywhere, in the workspace or out of it.
      expect(await topLevel()).toEqual(before);
      expect(await sh('ls /tmp /etc | grep -c evil || true')).toMatch(/^0$/m);
      expect(await sh('head -c 4 /etc/passwd')).toContain('root');
      // Deleting a link removes the link, never what it points to.
      expect((await del('esc/pw')).status).toBe(200);
      expect(await sh('test -e /etc/passwd && test ! -L esc/pw && echo intact')).toContain('intact');
    });

    it('refuses a tar with escaping, linked or special entries, and writes none of it', async () => {
      const before = await topLevel();
      const bad: Array<[string, NewEntry[], string]> = [
        ['a ../ entry', [{ name: 'ok.txt', body: Buffer.from('fine') }, { name: '../evil.txt', body: Buffer.from('evil') }], 'path_outside_workspace'],
        ['an absolute entry', [{ name: '/tmp/evil.txt', body: Buffer.from('evil') }], 'path_outside_workspace'],
        ['a symlink to /etc', [{ name: 'etc', type: 'symlink', linkname: '/etc' }], 'path_outside_workspace'],
        ['a symlink climbing out', [{ name: 'up', type: 'symlink', linkname: '../../..' }], 'path_outside_workspace'],
        ['an entry through its own symlink', [{ name: 'here', type: 'symlink', linkname: '.' }, { name: 'here/x.txt', body: Buffer.from('x') }], 'path_outside_workspace'],
        ['a hard link to a file outside', [{ name: 'hl', type: 'link', linkname: '/etc/passwd' }], 'path_outside_workspace'],
        ['a device', [{ name: 'null', type: 'character-device' }], 'invalid_entry'],
      ];
      for (const [what, entries, reason] of bad) {
        const res = await importTar('?path=imp/bad', await makeTar(entries));
        expect([what, res.status]).toEqual([what, 400]);
        expect([what, (await errorOf(res)).details]).toEqual([what, { reason }]);
      }
      expect(await topLevel()).toEqual(before);
      expect(await sh('ls /tmp | grep -c evil || true')).toMatch(/^0$/m);
    });

    it('refuses what is over the cap, with nothing written', async () => {
      const before = await topLevel();
      const over = await put('big/over.bin', Buffer.alloc(CAP + 1));
      expect(over.status).toBe(413);
      expect((await errorOf(over)).code).toBe('payload_too_large');
      const tooBig = await importTar('?path=imp/big', await makeTar([{ name: 'small.txt', body: Buffer.from('s') }, { name: 'huge.bin', size: CAP + 1 }]));
      expect(tooBig.status).toBe(413);
      expect(await topLevel()).toEqual(before);
      expect((await get('big/over.bin')).status).toBe(404);
    });

    it('asks for a Content-Length rather than storing a body of unknown size', async () => {
      const body = Readable.toWeb(Readable.from([Buffer.from('chunked')])) as ReadableStream;
      const res = await fetch(url('/files/chunked.txt'), { method: 'PUT', headers: auth(), body, duplex: 'half' } as RequestInit);
      expect(res.status).toBe(411);
      expect((await errorOf(res)).code).toBe('length_required');
    });
  });

  describe('tenancy', () => {
    it('answers another tenant 404 on every route, and writes nothing for it', async () => {
      expect((await put('mine.txt', Buffer.from('mine'))).status).toBe(200);
      const key = other.apiKey;
      for (const res of [
        await get('mine.txt', key),
        await put('mine.txt', Buffer.from('theirs'), key),
        await del('mine.txt', '', key),
        await exportTar('', key),
        await importTar('', await makeTar([{ name: 'mine.txt', body: Buffer.from('theirs') }]), key),
      ]) {
        expect(res.status).toBe(404);
        expect((await errorOf(res)).code).toBe('not_found');
      }
      expect(await (await get('mine.txt')).text()).toBe('mine');
    });
  });
});
