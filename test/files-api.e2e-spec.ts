import { createHash, randomBytes } from 'node:crypto';
import { TenantCredentials, TestStack } from './support/test-stack';

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
  const del = (path: string, query = '', key?: string) => fetch(url(`/files/${path}${query}`), { method: 'DELETE', headers: auth(key) });

  type ErrorBody = { error: { code: string; message: string; details?: Record<string, unknown> } };
  const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

  /** Runs a shell command in the sandbox and returns its output (setup and checks from inside). */
  const sh = async (command: string): Promise<string> => {
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command, timeout_seconds: 60 } } });
    if (res.status !== 200 || !/^exit_code: 0$/m.test(res.body.output)) throw new Error(`command failed: ${command}\n${res.text}`);
    return res.body.output;
  };

  beforeAll(async () => {
    stack = new TestStack();
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
});
