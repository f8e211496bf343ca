import { ScriptedModelServer } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';
import { callTool, CompletedToolCall } from './support/tool-runs';
import { WebFixtureServer } from './support/web-fixture-server';

/**
 * The browser's per-session limits in real Chromium, with a gateway configured tight:
 * two tabs per session and 48 MB of JavaScript heap. Also what GET /v1/tools says of
 * web_search on a gateway with no search provider.
 */
describe('browser limits', () => {
  const web = new WebFixtureServer();
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;

  const browse = (session: string, args: Record<string, unknown>): Promise<CompletedToolCall> => callTool(stack, tenant.apiKey, session, 'browser', args);
  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;

  beforeAll(async () => {
    await web.start();
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${web.port}`,
        RUNBOX_BROWSER_MAX_PAGES: '2',
        RUNBOX_BROWSER_MAX_HEAP_MB: '48',
      },
    }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await web.stop();
  });

  it('closes popups past RUNBOX_BROWSER_MAX_PAGES and says so', async () => {
    const session = await newSession();
    const opened = await browse(session, { action: 'navigate', url: `${web.origin}/popups` });
    expect(opened.is_error).toBe(false);
    // The pages count the popups they opened that are closed again (the opener's and the
    // surviving popup's text alike), so this waits for the limit to have acted.
    const settled = await browse(session, { action: 'wait_for', text: '2 of 3 popups closed, 0 blocked' });
    expect(settled.is_error).toBe(false);
    const notes = `${opened.output}\n${settled.output}`.split('\n').filter((l) => l.startsWith('A new tab'));
    expect(notes).toHaveLength(2);
    for (const note of notes) expect(note).toMatch(/^A new tab \(.*\) was closed: at most 2 tabs are open per session\.$/);
    const tabs = await browse(session, { action: 'tabs' });
    expect(tabs.output).not.toContain('A new tab');
  });

  it('resets a context whose pages go over RUNBOX_BROWSER_MAX_HEAP_MB, and the next call works', async () => {
    const session = await newSession();
    await browse(session, { action: 'navigate', url: `${web.origin}/cookie/set?v=before` });
    const hog = await browse(session, { action: 'navigate', url: `${web.origin}/hog` });
    expect(hog.output).toMatch(/The browser context was closed because its pages used \d+ MB of JavaScript heap, over the 48 MB limit; the next call starts a fresh one\./);
    const next = await browse(session, { action: 'navigate', url: `${web.origin}/cookie/show` });
    expect(next.is_error).toBe(false);
    // A fresh context: the cookie set before went with the old one.
    expect(next.output).toContain('cookie: [none]');
    expect(next.output).not.toContain('was closed because');
  });

  it('says why web_search is not offered when no provider is configured', async () => {
    const tools = (await stack.request('GET', '/v1/tools', { key: tenant.apiKey })).body.data as Array<{ name: string; available: boolean; unavailable_reason?: string }>;
    expect(tools.find((t) => t.name === 'web_search')).toMatchObject({ available: false, unavailable_reason: expect.stringContaining('RUNBOX_WEB_SEARCH_PROVIDER') });
    expect(tools.find((t) => t.name === 'browser')).toMatchObject({ available: true });
  });
});
