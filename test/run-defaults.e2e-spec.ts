import { expectedToolset, ScriptedModelServer } from '@app/testing';
import { RunsClient } from './support/runs';
import { TestStack } from './support/test-stack';

/**
 * Saved run defaults (seed 000): a tenant and each API key carry defaults for toolset, tools,
 * enabled, disabled, approval_mode, permissions and limits, set through the admin API; runs
 * take run > API key > tenant field by field, toolset and tools as a pair, deny rules
 * accumulating; the run shows the effective values and where each came from.
 */
describe('saved run defaults', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenantId: string;
  let catalogue: string[];
  let ci: { id: string; client: RunsClient };
  let other: RunsClient;

  const admin = (method: string, path: string, body?: unknown) => stack.request(method, `/v1/admin${path}`, { key: stack.adminToken, body });

  beforeAll(async () => {
    const modelUrl = await model.start();
    // Delegation off: delegate_task is registered but unavailable on this deployment.
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_DELEGATE_MAX_DEPTH: '0' } }).start();
    const tenant = await stack.createTenant();
    tenantId = tenant.tenantId;
    other = new RunsClient(stack, tenant.apiKey);
    const key = await admin('POST', `/tenants/${tenantId}/api_keys`, { name: 'ci' });
    expect(key.status).toBe(201);
    ci = { id: key.body.id, client: new RunsClient(stack, key.body.key) };
    catalogue = (await stack.request('GET', '/v1/tools', { key: tenant.apiKey })).body.data.map((t: { name: string }) => t.name);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  const lastOffer = () => ScriptedModelServer.offeredTools(model.requests[model.requests.length - 1]);

  it('a CI key defaults to coding, prompt and a deny rule; another key of the tenant keeps the tenant defaults', async () => {
    const tenantDefaults = { toolset: 'minimal', limits: { max_output_chars: 5000 } };
    const setTenant = await admin('PATCH', `/tenants/${tenantId}`, { run_defaults: tenantDefaults });
    expect(setTenant.status).toBe(200);
    expect(setTenant.body.run_defaults).toEqual(tenantDefaults);
    const ciDefaults = { toolset: 'coding', approval_mode: 'prompt', permissions: { deny: ['terminal(rm *)'] } };
    const setKey = await admin('PATCH', `/api_keys/${ci.id}`, { run_defaults: ciDefaults });
    expect(setKey.status).toBe(200);
    expect(setKey.body).toMatchObject({ id: ci.id, name: 'ci', run_defaults: ciDefaults });
    expect((await admin('GET', `/tenants/${tenantId}/api_keys`)).body.data.find((k: { id: string }) => k.id === ci.id).run_defaults).toEqual(ciDefaults);

    // The CI run: coding tools, rm refused by the key's rule, a mutating call held for approval.
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_rm', name: 'terminal', arguments: { command: 'rm -rf build' } },
          { id: 'call_write', name: 'write_file', arguments: { path: 'notes.txt', content: 'n' } },
        ],
      },
      { content: 'ci done' },
    );
    const { id } = await ci.client.start({ input: 'build it' });
    await ci.client.wait(id, ['requires_approval']);
    expect(lastOffer()).toEqual(expectedToolset('coding', catalogue).filter((n) => n !== 'delegate_task'));
    const waiting = (await ci.client.get(id)).body;
    expect(waiting.pending_approvals.map((p: { tool_call_id: string }) => p.tool_call_id)).toEqual(['call_write']);
    expect(waiting.options).toEqual({
      toolset: 'coding',
      approval_mode: 'prompt',
      permissions: { deny: ['terminal(rm *)'] },
      limits: { max_output_chars: 5000 },
    });
    expect(waiting.option_sources).toEqual({ toolset: 'api_key', approval_mode: 'api_key', 'permissions.deny': ['api_key'], limits: 'tenant' });
    expect(waiting.tools_dropped).toEqual([{ name: 'delegate_task', reason: 'unavailable', detail: expect.stringMatching(/RUNBOX_DELEGATE_MAX_DEPTH=0/) }]);
    await ci.client.decide(id, { tool_call_id: 'call_write', decision: 'approve' });
    expect((await ci.client.wait(id)).output).toBe('ci done');
    const rows = Object.fromEntries((await ci.client.toolCallRows(id)).map((r) => [r.call_id, [r.status, r.decision]]));
    expect(rows).toEqual({ call_rm: ['refused', 'rule_deny'], call_write: ['completed', 'approved'] });

    // The tenant's other key: the tenant's toolset, auto approval.
    model.enqueue({ content: 'other done' });
    const plain = await other.wait((await other.start({ input: 'hello' })).id);
    expect(plain).toMatchObject({ status: 'completed', options: tenantDefaults, option_sources: { toolset: 'tenant', limits: 'tenant' } });
    expect(lastOffer()).toEqual(expectedToolset('minimal', catalogue));
  });

  it('a run overrides field by field, replaces toolset with tools as a pair, and cannot drop a saved deny rule', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_rm', name: 'terminal', arguments: { command: 'rm -rf build' } }] }, { content: 'done' });
    const { id } = await ci.client.start({
      input: 'override',
      tools: ['terminal', 'read_file'],
      approval_mode: 'auto',
      permissions: { allow: ['terminal(rm *)'], deny: ['terminal(curl *)'] },
    });
    const run = await ci.client.wait(id);
    expect(lastOffer()).toEqual(['read_file', 'terminal']);
    expect(run.options).toEqual({
      tools: ['terminal', 'read_file'],
      approval_mode: 'auto',
      permissions: { allow: ['terminal(rm *)'], deny: ['terminal(rm *)', 'terminal(curl *)'] },
      limits: { max_output_chars: 5000 },
    });
    expect(run.option_sources).toEqual({
      tools: 'run',
      approval_mode: 'run',
      'permissions.allow': 'run',
      'permissions.deny': ['api_key', 'run'],
      limits: 'tenant',
    });
    expect(run.tools).toEqual([
      { name: 'read_file', source: 'tools:read_file' },
      { name: 'terminal', source: 'tools:terminal' },
    ]);
    expect((await ci.client.toolCallRows(id)).map((r) => [r.call_id, r.status, r.decision])).toEqual([['call_rm', 'refused', 'rule_deny']]);
  });

  it('null clears saved defaults; bad defaults are a 400 naming the field; unknown ids are 404', async () => {
    expect((await admin('PATCH', `/api_keys/${ci.id}`, { run_defaults: null })).body.run_defaults).toBeNull();
    expect((await admin('PATCH', `/tenants/${tenantId}`, { run_defaults: null })).body).toMatchObject({ run_defaults: null });
    model.enqueue({ content: 'plain' });
    const run = await ci.client.wait((await ci.client.start({ input: 'no defaults' })).id);
    expect(run.options).toEqual({});
    expect(run.option_sources).toEqual({});

    const bad = await admin('PATCH', `/api_keys/${ci.id}`, { run_defaults: { toolset: 'everything' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('run_defaults.toolset');
    const notAllowed = await admin('PATCH', `/tenants/${tenantId}`, { run_defaults: { model: 'gpt' } });
    expect(notAllowed.status).toBe(400);
    expect(notAllowed.body.error.message).toContain('model');
    expect((await admin('PATCH', `/tenants/${tenantId}`, {})).status).toBe(400);
    expect((await admin('PATCH', '/api_keys/key_nope', { run_defaults: null })).status).toBe(404);
    // A tenant's key cannot use the admin API.
    expect((await stack.request('PATCH', `/v1/admin/api_keys/${ci.id}`, { key: ci.client.key, body: { run_defaults: null } })).status).toBe(401);
  });

  it('GET /v1/tools marks a tool this deployment cannot run, and says why', async () => {
    const tools = (await stack.request('GET', '/v1/tools', { key: other.key })).body.data;
    const delegate = tools.find((t: { name: string }) => t.name === 'delegate_task');
    expect(delegate).toMatchObject({ available: false, unavailable_reason: expect.stringMatching(/turned off .*RUNBOX_DELEGATE_MAX_DEPTH=0/) });
    expect(tools.find((t: { name: string }) => t.name === 'read_file')).toMatchObject({ available: true });
  });
});
