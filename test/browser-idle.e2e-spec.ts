import { BrowserPool } from '../apps/gateway/src/web/browser/browser-pool';
import { eventually } from './support/runs';
import { TenantCredentials, TestStack } from './support/test-stack';
import { callTool, CompletedToolCall } from './support/tool-runs';
import { WebFixtureServer } from './support/web-fixture-server';

/**
 * A session's browser context closes once the session has not used it for
 * RUNBOX_BROWSER_IDLE_SECONDS (here 1 s): its memory is given back, and the next call
 * starts from a fresh context (no tabs, no cookies).
 */
describe('browser idle contexts', () => {
  const web = new WebFixtureServer();
  let stack: TestStack;
  let tenant: TenantCredentials;

  const browse = (session: string, args: Record<string, unknown>): Promise<CompletedToolCall> => callTool(stack, tenant.apiKey, session, 'browser', args);

  beforeAll(async () => {
    await web.start();
    stack = await new TestStack({ env: { RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${web.port}`, RUNBOX_BROWSER_IDLE_SECONDS: '1' } }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
    await web.stop();
  });

  it('closes a context its session left idle, and the next call starts afresh', async () => {
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    const pool = stack.gatewayApp.get(BrowserPool);
    const set = await browse(session, { action: 'navigate', url: `${web.origin}/cookie/set?v=idle` });
    expect(set.is_error).toBe(false);

    await eventually('the idle context to close', async () => (pool.openSessions() === 0 ? true : undefined), 30_000);

    const tabs = await browse(session, { action: 'tabs' });
    expect(tabs.output).not.toContain('/cookie/set');
    const shown = await browse(session, { action: 'navigate', url: `${web.origin}/cookie/show` });
    expect(shown.output).toContain('cookie: [none]');
  });

  it('never closes a context while a call is using it, however long the call takes', async () => {
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    // The page answers after 2.5 s, more than twice the idle time: the sweep runs meanwhile.
    const late = await browse(session, { action: 'navigate', url: `${web.origin}/late?ms=2500` });
    expect({ is_error: late.is_error, output: late.output.slice(0, 300) }).toMatchObject({ is_error: false });
    expect(late.output).toContain('Worth the wait');
  });
});
