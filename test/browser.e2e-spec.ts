import { readdirSync, readFileSync } from 'node:fs';
import { ScriptedModelServer } from '@app/testing';
import { BrowserPool } from '../apps/gateway/src/web/browser/browser-pool';
import { TenantCredentials, TestStack } from './support/test-stack';
import { callTool, CompletedToolCall, runToolCalls } from './support/tool-runs';
import { WebFixtureServer } from './support/web-fixture-server';

/** The Chromium this test process launched (the gateway runs in it): its main process. */
function chromiumPid(): number {
  const pids = readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number);
  const ours = pids.filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      return ppid === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--proxy-server=http://127.0.0.1:9');
    } catch {
      return false;
    }
  });
  if (ours.length !== 1) throw new Error(`expected one Chromium started by this process, found ${ours.length}`);
  return ours[0];
}

/** Resolves once the process has exited and been reaped (bounded). */
async function processGone(pid: number): Promise<void> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`process ${pid} is still there`);
}

/**
 * The browser tool in a real headless Chromium, every request of its pages routed through
 * the egress guard to a server on loopback (allowed by its exact port, nothing else).
 */
describe('browser', () => {
  const web = new WebFixtureServer();
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let a: TenantCredentials;
  let b: TenantCredentials;
  let sessionA: string;
  let sessionB: string;

  const browse = (t: TenantCredentials, session: string, args: Record<string, unknown>): Promise<CompletedToolCall> =>
    callTool(stack, t.apiKey, session, 'browser', args);

  /** The ref the snapshot gives the element with this role and name. */
  const refOf = (snapshot: string, role: string, name: string): string => {
    const line = snapshot.split('\n').find((l) => l.includes(`${role} "${name}"`));
    const ref = line && /\[ref=((?:f\d+)?e\d+)\]/.exec(line)?.[1];
    if (!ref) throw new Error(`no ${role} "${name}" in the snapshot:\n${snapshot}`);
    return ref;
  };

  beforeAll(async () => {
    await web.start();
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${web.port}` },
    }).start();
    [a, b] = [await stack.createTenant(), await stack.createTenant()];
    sessionA = (await stack.request('POST', '/v1/sessions', { key: a.apiKey, body: {} })).body.id;
    sessionB = (await stack.request('POST', '/v1/sessions', { key: b.apiKey, body: {} })).body.id;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await web.stop();
  });

  it('fills and submits a form whose script posts it, and sees the answer', async () => {
    const opened = await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/form` });
    expect(opened.is_error).toBe(false);
    expect(opened.output).toContain(`Page: Sign up — ${web.origin}/form`);
    const name = refOf(opened.output, 'textbox', 'Name');
    const plan = refOf(opened.output, 'combobox', 'Plan');
    const send = refOf(opened.output, 'button', 'Send');

    expect((await browse(a, sessionA, { action: 'type', ref: name, text: 'Ada' })).is_error).toBe(false);
    const selected = await browse(a, sessionA, { action: 'select', ref: plan, values: ['pro'] });
    expect(selected.output).toContain('Selected pro');
    expect((await browse(a, sessionA, { action: 'click', ref: send })).is_error).toBe(false);
    const done = await browse(a, sessionA, { action: 'wait_for', text: 'Thanks, Ada (pro)' });
    expect(done.is_error).toBe(false);
    expect(done.output).toContain('Thanks, Ada (pro)');
    expect(web.requests.find((r) => r.path === '/submit')?.body).toBe('{"name":"Ada","plan":"pro"}');
  });

  it('blocks a script that fetches 127.0.0.1:5432 and says so in the result', async () => {
    const res = await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/probe` });
    const settled = await browse(a, sessionA, { action: 'wait_for', text: 'probe failed' });
    expect(settled.is_error).toBe(false);
    const report = `${res.output}\n${settled.output}`;
    expect(report).toMatch(/Blocked requests \(not allowed to leave\):\n- fetch http:\/\/127\.0\.0\.1:5432\/: 127\.0\.0\.1:5432 is a loopback address/);
    const blocked = [...(res.metadata.blocked_requests ?? []), ...(settled.metadata.blocked_requests ?? [])];
    expect(blocked).toEqual([expect.objectContaining({ url: 'http://127.0.0.1:5432/', kind: 'fetch' })]);
  });

  it('refuses to navigate to an address that is not allowed', async () => {
    const res = await browse(a, sessionA, { action: 'navigate', url: 'http://127.0.0.2:5432/' });
    expect(res.is_error).toBe(true);
    expect(res.output).toMatch(/Blocked requests[\s\S]*127\.0\.0\.2:5432 is a loopback address/);
  });

  it("keeps each session's cookies to itself", async () => {
    await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/cookie/set?v=alpha` });
    await browse(b, sessionB, { action: 'navigate', url: `${web.origin}/cookie/set?v=beta` });
    const seenByA = await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/cookie/show` });
    const seenByB = await browse(b, sessionB, { action: 'navigate', url: `${web.origin}/cookie/show` });
    expect(seenByA.output).toContain('cookie: [who=alpha]');
    expect(seenByB.output).toContain('cookie: [who=beta]');
    // And on the wire: no request ever carried the other session's cookie.
    const shows = web.requests.filter((r) => r.path === '/cookie/show').map((r) => r.cookie);
    expect(shows).toEqual(['who=alpha', 'who=beta']);
  });

  it('saves a screenshot into the session workspace and reports its size and dimensions', async () => {
    const res = await browse(a, sessionA, { action: 'screenshot' });
    expect(res.is_error).toBe(false);
    expect(res.metadata).toMatchObject({ width: 1280, height: 800 });
    const path = res.metadata.path as string;
    expect(path).toMatch(/^\.runbox\/browser\/screenshot-.*\.png$/);
    const read = await callTool(stack, a.apiKey, sessionA, 'read_file', { path });
    expect(read.metadata).toMatchObject({ kind: 'image', format: 'PNG', size_bytes: res.metadata.size_bytes });
    // The other tenant's workspace does not have it.
    const other = await callTool(stack, b.apiKey, sessionB, 'read_file', { path });
    expect(other.is_error).toBe(true);
  });

  it('lists and closes tabs, and goes back', async () => {
    const back = await browse(a, sessionA, { action: 'back' });
    expect(back.output).toContain('/cookie/set?v=alpha');
    const tabs = await browse(a, sessionA, { action: 'tabs' });
    expect(tabs.output).toMatch(/^Open tabs:\n1\. .* \(current\)$/);
    expect((await browse(a, sessionA, { action: 'tabs', tab: 5 })).is_error).toBe(true);
  });

  it('relaunches a Chromium that died on the next call, and tells the session what it lost', async () => {
    const pid = chromiumPid();
    process.kill(pid, 'SIGKILL');
    await processGone(pid);
    const res = await browse(a, sessionA, { action: 'tabs' });
    expect(res.is_error).toBe(false);
    expect(res.output).toContain("the browser had stopped and was restarted; this session's earlier tabs and cookies are gone");
    expect(res.metadata.restarted).toBe(true);
    // The cookie went with the old context; the next call has no note.
    const shown = await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/cookie/show` });
    expect(shown.output).toContain('cookie: [none]');
    expect(shown.metadata.restarted).toBeUndefined();
    expect(chromiumPid()).not.toBe(pid);
  });

  describe('evaluate (script in the page), per tenant', () => {
    const admin = (method: string, tenantId: string, body?: unknown) => stack.request(method, `/v1/admin/tenants/${tenantId}`, { key: stack.adminToken, body });

    it('is refused by default, and the script does not run', async () => {
      await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/form` });
      const res = await browse(a, sessionA, { action: 'evaluate', expression: "document.title = 'rewritten'" });
      expect(res).toMatchObject({ is_error: true, metadata: { error_code: 'evaluate_not_enabled' } });
      expect(res.output).toMatch(/^The evaluate action is turned off for this tenant/);
      expect((await browse(a, sessionA, { action: 'snapshot' })).output).toContain('Page: Sign up');
      expect((await admin('GET', a.tenantId)).body.browser_evaluate).toBe(false);
    });

    it("runs after the admin API enables it for the tenant, and the other tenant's setting stays off", async () => {
      const set = await admin('PATCH', a.tenantId, { browser_evaluate: true });
      expect(set.status).toBe(200);
      expect(set.body.browser_evaluate).toBe(true);
      expect((await admin('GET', b.tenantId)).body.browser_evaluate).toBe(false);

      const res = await browse(a, sessionA, { action: 'evaluate', expression: '({ title: document.title, fields: [...document.querySelectorAll("input, select")].map((e) => e.id), big: 2n ** 70n })' });
      expect(res.is_error).toBe(false);
      expect(res.output).toMatch(new RegExp(`^Result of the script on ${web.origin}/form:\n`));
      expect(JSON.parse(res.output.slice(res.output.indexOf('\n') + 1))).toEqual({ title: 'Sign up', fields: ['name', 'plan'], big: '1180591620717411303424' });
      // A function is called and its promise awaited; the page's state is what the script sees.
      const awaited = await browse(a, sessionA, { action: 'evaluate', expression: 'async () => { await new Promise((r) => setTimeout(r, 1)); return location.pathname; }' });
      expect(awaited.output).toContain('\n"/form"');

      await browse(b, sessionB, { action: 'navigate', url: `${web.origin}/form` });
      const other = await browse(b, sessionB, { action: 'evaluate', expression: 'document.title' });
      expect(other).toMatchObject({ is_error: true, metadata: { error_code: 'evaluate_not_enabled' } });
    });

    it('saves a result longer than the output budget into the workspace, read back with read_file', async () => {
      const res = await browse(a, sessionA, { action: 'evaluate', expression: 'Array.from({ length: 6000 }, (_, i) => "line " + i)' });
      expect(res.is_error).toBe(false);
      const { saved_to: path, next_offset: offset, chars } = res.metadata as { saved_to: string; next_offset: number; chars: number };
      expect(path).toMatch(/^\.runbox\/web\/127\.0\.0\.1-[0-9a-f]{12}\.evaluate\.txt$/);
      expect(chars).toBeGreaterThan(60_000);
      expect(res.output).toContain(`read_file path="${path}" offset=${offset}`);
      const rest = await callTool(stack, a.apiKey, sessionA, 'read_file', { path, offset, limit: 2 });
      expect(rest.is_error).toBe(false);
      expect(rest.output).toMatch(/"line \d+",\n.*"line \d+",/);
    });

    it('reports a failing script as an error, and is mutating for approvals', async () => {
      const thrown = await browse(a, sessionA, { action: 'evaluate', expression: 'noSuchThing.value' });
      expect(thrown).toMatchObject({ is_error: true, output: expect.stringContaining('ReferenceError: noSuchThing is not defined') });
      const missing = await browse(a, sessionA, { action: 'evaluate' });
      expect(missing).toMatchObject({ is_error: true, output: 'evaluate needs expression' });
      // approval_mode deny refuses tools that change state: evaluate is one of them.
      const { results } = await runToolCalls(stack, model, a.apiKey, [{ name: 'browser', arguments: { action: 'evaluate', expression: '1 + 1' } }], { approval_mode: 'deny', toolset: 'browser' });
      expect(results[0]).toMatchObject({ is_error: true, output: expect.stringMatching(/^refused: browser .*approval mode is deny/) });
    });

    it('stops a script that runs past its time, and the tab still works', async () => {
      // The run's browser limit of 7 s leaves each action 2 s.
      const { results } = await runToolCalls(
        stack,
        model,
        a.apiKey,
        [
          { name: 'browser', arguments: { action: 'navigate', url: `${web.origin}/form` } },
          { name: 'browser', arguments: { action: 'evaluate', expression: 'while (true) {}' } },
          { name: 'browser', arguments: { action: 'evaluate', expression: 'document.title' } },
        ],
        { toolset: 'browser', limits: { timeouts: { browser: 7 } } },
      );
      expect(results[1]).toMatchObject({ is_error: true, output: 'The script did not finish within 2 s and was stopped.', metadata: { error_code: 'timeout' } });
      expect(results[2]).toMatchObject({ is_error: false, output: expect.stringContaining('\n"Sign up"') });
    });

    it('refuses a setting that is not a boolean with a 400 naming it', async () => {
      for (const bad of ['yes', 1, null]) {
        const res = await admin('PATCH', b.tenantId, { browser_evaluate: bad });
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: expect.any(String), message: expect.stringContaining('browser_evaluate') });
      }
      const tooLong = await stack.request('POST', `/v1/sessions/${sessionA}/tools/browser`, { key: a.apiKey, body: { arguments: { action: 'evaluate', expression: 'x'.repeat(100_001) } } });
      expect(tooLong.status).toBe(400);
      expect((await admin('GET', b.tenantId)).body.browser_evaluate).toBe(false);
    });
  });

  describe('WebSockets, carried through the egress guard', () => {
    it('connects a page to an allowed server and passes messages both ways, without the session cookies', async () => {
      await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/cookie/set?v=alpha` });
      const before = web.sockets.length;
      await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/socket?to=${encodeURIComponent(`ws://127.0.0.1:${web.port}/ws`)}` });
      const res = await browse(a, sessionA, { action: 'wait_for', text: 'ws said: echo: hello' });
      expect(res.is_error).toBe(false);
      expect(res.metadata.blocked_requests).toBeUndefined();
      expect(web.sockets.slice(before)).toEqual([{ path: '/ws', host: `127.0.0.1:${web.port}`, cookie: undefined, origin: undefined }]);
    });

    it('blocks a socket to 127.0.0.1:5432 and says so in the result', async () => {
      const opened = await browse(a, sessionA, { action: 'navigate', url: `${web.origin}/socket?to=${encodeURIComponent('ws://127.0.0.1:5432/')}` });
      const closed = await browse(a, sessionA, { action: 'wait_for', text: 'ws closed 1008' });
      expect(closed.is_error).toBe(false);
      const report = `${opened.output}\n${closed.output}`;
      expect(report).toMatch(/Blocked requests \(not allowed to leave\):\n- websocket ws:\/\/127\.0\.0\.1:5432\/: 127\.0\.0\.1:5432 is a loopback address/);
    });

    it("blocks a socket to a host on the tenant's deny list before it is resolved", async () => {
      const c = await stack.createTenant();
      const sessionC = (await stack.request('POST', '/v1/sessions', { key: c.apiKey, body: {} })).body.id;
      await stack.request('PATCH', `/v1/admin/tenants/${c.tenantId}`, { key: stack.adminToken, body: { egress: { allow: [], deny: ['localhost'] } } });
      const before = web.sockets.length;
      const opened = await browse(c, sessionC, { action: 'navigate', url: `${web.origin}/socket?to=${encodeURIComponent(`ws://localhost:${web.port}/ws`)}` });
      const closed = await browse(c, sessionC, { action: 'wait_for', text: 'ws closed 1008' });
      const blocked = [...(opened.metadata.blocked_requests ?? []), ...(closed.metadata.blocked_requests ?? [])];
      expect(blocked).toEqual([{ url: `ws://localhost:${web.port}/ws`, kind: 'websocket', reason: "localhost is on this tenant's egress deny list" }]);
      expect(web.sockets.length).toBe(before);
      // The same tenant's navigation to a denied host is refused alike.
      const page = await browse(c, sessionC, { action: 'navigate', url: `http://localhost:${web.port}/article` });
      expect(page.is_error).toBe(true);
      expect(page.output).toContain("localhost is on this tenant's egress deny list");
    });
  });

  it('saves a snapshot longer than the output budget into the workspace', async () => {
    const res = await browse(b, sessionB, { action: 'navigate', url: `${web.origin}/article?paragraphs=200` });
    expect(res.is_error).toBe(false);
    const { saved_to: path, next_offset: offset } = res.metadata as { saved_to: string; next_offset: number };
    expect(path).toMatch(/^\.runbox\/web\/127\.0\.0\.1-[0-9a-f]{12}\.snapshot\.txt$/);
    expect(res.output).toContain(`read_file path="${path}" offset=${offset}`);
    const rest = await callTool(stack, b.apiKey, sessionB, 'read_file', { path, offset, limit: 5 });
    expect(rest.output).toContain('The lighthouse keeper logged every passing ship');
  });

  it('closes the browser context of a session that is deleted', async () => {
    const pool = stack.gatewayApp.get(BrowserPool);
    const c = await stack.createTenant();
    const session = (await stack.request('POST', '/v1/sessions', { key: c.apiKey, body: {} })).body.id;
    await browse(c, session, { action: 'tabs' });
    const open = pool.openSessions();
    expect((await stack.request('DELETE', `/v1/sessions/${session}`, { key: c.apiKey })).status).toBe(204);
    expect(pool.openSessions()).toBe(open - 1);
  });

  it('answers a bad ref or a missing argument with an error the model can act on', async () => {
    const missing = await browse(a, sessionA, { action: 'click' });
    expect(missing).toMatchObject({ is_error: true, output: 'click needs ref' });
    const bad = await stack.request('POST', `/v1/sessions/${sessionA}/tools/browser`, { key: a.apiKey, body: { arguments: { action: 'click', ref: 'button' } } });
    expect(bad.status).toBe(400);
  });
});
