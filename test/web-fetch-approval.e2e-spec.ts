import { ScriptedModelServer } from '@app/testing';
import { RunsClient } from './support/runs';
import { TenantCredentials, TestStack } from './support/test-stack';
import { ARTICLE_SENTENCE, WebFixtureServer } from './support/web-fixture-server';

/**
 * The operator's per-tenant `approval_required` list: web_fetch only reads, so it normally
 * runs without asking, but a tenant whose operator marked it waits for approval under
 * approval_mode prompt (and is refused under deny), whatever the run's own rules say.
 */
describe('tenant approval_required', () => {
  const web = new WebFixtureServer();
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let marked: TenantCredentials;
  let plain: TenantCredentials;

  const admin = (method: string, tenantId: string, body?: unknown) =>
    stack.request(method, `/v1/admin/tenants/${tenantId}`, { key: stack.adminToken, body });
  const fetchCall = (id: string) => ({ id, name: 'web_fetch', arguments: { url: `${web.origin}/article` } });
  const articleFetches = () => web.requests.filter((r) => r.path === '/article').length;

  beforeAll(async () => {
    await web.start();
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${web.port}` },
    }).start();
    marked = await stack.createTenant();
    plain = await stack.createTenant();
    const set = await admin('PATCH', marked.tenantId, { approval_required: ['web_fetch'] });
    expect(set.status).toBe(200);
    expect(set.body.approval_required).toEqual(['web_fetch']);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await web.stop();
  });

  beforeEach(() => model.reset());

  it('prompt: the marked tenant waits for approval before web_fetch runs, even when the run allows it', async () => {
    const runs = new RunsClient(stack, marked.apiKey);
    model.enqueue({ toolCalls: [fetchCall('call_f')] }, (req) => ({ content: req.body.messages.find((m) => m.tool_call_id === 'call_f')?.content ?? 'none' }));
    const before = articleFetches();
    const { id } = await runs.start({ input: 'read it', toolset: 'research', approval_mode: 'prompt', permissions: { allow: ['web_fetch'] } });
    const waiting = await runs.wait(id, ['requires_approval']);
    expect(waiting.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_f', name: 'web_fetch' })]);
    // Nothing was fetched while the call waits.
    expect(articleFetches()).toBe(before);

    expect((await runs.decide(id, { tool_call_id: 'call_f', decision: 'approve' })).status).toBe(200);
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');
    expect(run.output).toContain(ARTICLE_SENTENCE);
    expect(articleFetches()).toBe(before + 1);
  });

  it('deny: the marked tenant has web_fetch refused', async () => {
    const runs = new RunsClient(stack, marked.apiKey);
    model.enqueue({ toolCalls: [fetchCall('call_d')] }, (req) => ({ content: req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content ?? 'none' }));
    const before = articleFetches();
    const { id } = await runs.start({ input: 'read it', toolset: 'research', approval_mode: 'deny' });
    const run = await runs.wait(id);
    expect(run.output).toMatch(/^refused: web_fetch needs approval for this tenant and this run's approval mode is deny/);
    expect(articleFetches()).toBe(before);
  });

  it('prompt: another tenant runs web_fetch directly', async () => {
    const runs = new RunsClient(stack, plain.apiKey);
    model.enqueue({ toolCalls: [fetchCall('call_p')] }, (req) => ({ content: req.body.messages.find((m) => m.tool_call_id === 'call_p')?.content ?? 'none' }));
    const { id } = await runs.start({ input: 'read it', toolset: 'research', approval_mode: 'prompt' });
    const run = await runs.wait(id, ['completed', 'failed', 'cancelled', 'requires_approval']);
    expect(run.status).toBe('completed');
    expect(run.output).toContain(ARTICLE_SENTENCE);
  });

  it('is shown by GET, cleared by [], and refuses unknown tools and bad input with a 400', async () => {
    expect((await admin('GET', marked.tenantId)).body.approval_required).toEqual(['web_fetch']);
    expect((await admin('GET', plain.tenantId)).body.approval_required).toEqual([]);

    const unknown = await admin('PATCH', plain.tenantId, { approval_required: ['web_fetch', 'no_such_tool'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toContain('no_such_tool');
    for (const bad of ['web_fetch', [''], [42], null]) {
      const res = await admin('PATCH', plain.tenantId, { approval_required: bad });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: expect.any(String), message: expect.stringContaining('approval_required') });
    }
    expect((await admin('GET', plain.tenantId)).body.approval_required).toEqual([]);

    const cleared = await admin('PATCH', plain.tenantId, { approval_required: [] });
    expect(cleared.status).toBe(200);
    expect(cleared.body.approval_required).toEqual([]);
  });
});
