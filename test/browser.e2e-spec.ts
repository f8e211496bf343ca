import { readdirSync, readFileSync } from 'node:fs';
import { ScriptedModelServer } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';
import { callTool, CompletedToolCall } from './support/tool-runs';
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

  it('answers a bad ref or a missing argument with an error the model can act on', async () => {
    const missing = await browse(a, sessionA, { action: 'click' });
    expect(missing).toMatchObject({ is_error: true, output: 'click needs ref' });
    const bad = await stack.request('POST', `/v1/sessions/${sessionA}/tools/browser`, { key: a.apiKey, body: { arguments: { action: 'click', ref: 'button' } } });
    expect(bad.status).toBe(400);
  });
});
