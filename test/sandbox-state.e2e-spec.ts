import { eventually } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';

/** The sandbox's state as clients see it in GET /v1/sessions/{id}. */
describe('sandbox state on the session', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;

  const state = async (id: string) => (await stack.request('GET', `/v1/sessions/${id}`, { key: tenant.apiKey })).body.sandbox.state;
  const terminal = (id: string, command: string) =>
    stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command } } });

  beforeAll(async () => {
    stack = await new TestStack({ env: { RUNBOX_SANDBOX_IDLE_TTL_SECONDS: '1' } }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('goes none → ready → stopped when idle → ready again, keeping the workspace', async () => {
    const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    expect(await state(id)).toBe('none');
    expect((await terminal(id, 'echo persisted > file.txt')).status).toBe(200);
    expect(await state(id)).toBe('ready');
    await eventually('the idle reaper', async () => (await state(id)) === 'stopped');
    const again = await terminal(id, 'cat file.txt');
    expect(again.status).toBe(200);
    expect(again.body.output).toContain('persisted');
    expect(await state(id)).toBe('ready');
  });
});

describe('a sandbox that cannot start', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await new TestStack({ env: { RUNBOX_SANDBOX_IMAGE: 'runbox-sandbox:does-not-exist' } }).start();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('answers 502 sandbox_failed with the reason, and the session says failed', async () => {
    const tenant = await stack.createTenant();
    const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    const res = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('sandbox_failed');
    expect(res.body.error.message).toMatch(/could not start the sandbox: .*does-not-exist/);
    expect(res.text).not.toMatch(/at .*\.ts:\d+/);
    const session = await stack.request('GET', `/v1/sessions/${id}`, { key: tenant.apiKey });
    expect(session.body.sandbox.state).toBe('failed');
  });
});
