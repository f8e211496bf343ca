import { ScriptedModelServer } from '@app/testing';
import Docker from 'dockerode';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * A run end to end: HTTP → gateway → scripted model (real HTTP) → terminal call over NATS →
 * executor → a real hardened container → result back to the model → answer stored.
 */
describe('walking skeleton', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  const docker = new Docker();

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_MODEL_API_KEY: 'sk-test-secret' } });
    await stack.start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  it('answers health and readiness with every dependency up', async () => {
    expect((await stack.request('GET', '/healthz')).status).toBe(200);
    const ready = await stack.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.checks).toEqual({ postgres: 'ok', nats: 'ok', executor: 'ok' });
  });

  it('runs the model, a terminal call in the sandbox, and stores every message', async () => {
    model.enqueue(
      { toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'echo hello-from-$(id -un) > note.txt && cat note.txt' } }] },
      (req) => {
        const toolMessage = req.body.messages.find((m) => m.role === 'tool');
        return { content: `The sandbox said: ${toolMessage?.content?.match(/hello-from-\w+/)?.[0]}` };
      },
    );
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'Say hello from the sandbox' } });
    expect(created.status).toBe(202);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^run_/), session_id: expect.stringMatching(/^ses_/), status: 'queued' });

    const run = await stack.waitForRun(tenant.apiKey, created.body.id);
    expect(run.status).toBe('completed');
    expect(run.output).toBe('The sandbox said: hello-from-sandbox');
    expect(run.usage).toMatchObject({ input_tokens: 20, output_tokens: 10, tool_calls: 1 });

    // The model saw the tool definitions and the configured model name, with its key.
    expect(model.requests[0].body.model).toBe('scripted-1');
    expect(model.requests[0].headers.authorization).toBe('Bearer sk-test-secret');
    expect(model.requests[0].body.tools?.map((t) => t.function.name)).toContain('terminal');

    const messages = await stack.request('GET', `/v1/sessions/${created.body.session_id}/messages`, { key: tenant.apiKey });
    expect(messages.status).toBe(200);
    const roles = messages.body.data.map((m: { role: string }) => m.role);
    expect(roles).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages.body.data[1].tool_calls[0]).toMatchObject({ id: 'call_1', function: { name: 'terminal' } });
    expect(messages.body.data[2]).toMatchObject({ tool_call_id: 'call_1' });
    expect(messages.body.data[2].content).toContain('exit_code: 0');
    expect(messages.body.data[3].content).toBe('The sandbox said: hello-from-sandbox');

    // The container exists, carries its session and tenant labels, and the session shows it ready.
    const containers = await docker.listContainers({ filters: { label: [`runbox.session=${created.body.session_id}`] } });
    expect(containers).toHaveLength(1);
    expect(containers[0].Labels['runbox.tenant']).toBe(tenant.tenantId);
    const session = await stack.request('GET', `/v1/sessions/${created.body.session_id}`, { key: tenant.apiKey });
    expect(session.body.sandbox.state).toBe('ready');
  });

  it('a follow-up run in the same session sees the earlier history', async () => {
    model.enqueue({ content: 'first answer' });
    const first = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'remember the word kumquat' } });
    await stack.waitForRun(tenant.apiKey, first.body.id);
    model.enqueue((req) => ({ content: `I saw ${req.body.messages.length} messages` }));
    const second = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: first.body.session_id, input: 'what word?' } });
    const run = await stack.waitForRun(tenant.apiKey, second.body.id);
    expect(run.output).toBe('I saw 3 messages');
    const last = model.requests[model.requests.length - 1];
    expect(last.body.messages.map((m) => m.content)).toEqual(['remember the word kumquat', 'first answer', 'what word?']);
  });

  it('runs a tool directly in the session sandbox, and deleting the session removes its container', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: { metadata: { purpose: 'direct' } } });
    expect(session.status).toBe(201);
    const id = session.body.id;
    const first = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'cd /tmp && export COLOR=teal' } } });
    expect(first.status).toBe(200);
    expect(first.body.is_error).toBe(false);
    const second = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'echo $PWD $COLOR' } } });
    expect(second.body.output).toContain('/tmp teal');
    expect(second.body.metadata.exit_code).toBe(0);

    expect(await docker.listContainers({ filters: { label: [`runbox.session=${id}`] } })).toHaveLength(1);
    expect((await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(204);
    expect(await docker.listContainers({ all: true, filters: { label: [`runbox.session=${id}`] } })).toHaveLength(0);
    const volumes = await docker.listVolumes({ filters: { label: [`runbox.session=${id}`] } });
    expect(volumes.Volumes ?? []).toHaveLength(0);
    expect((await stack.request('GET', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(404);
    // Right after calls that routed it (the gateway remembers a live session's route briefly).
    const afterDelete = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
    expect(afterDelete.status).toBe(404);
    expect(await docker.listContainers({ all: true, filters: { label: [`runbox.session=${id}`] } })).toHaveLength(0);
  });

  it("answers another tenant's session and run exactly like missing ones", async () => {
    const other = await stack.createTenant();
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    model.enqueue({ content: 'mine' });
    const run = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: session.body.id, input: 'x' } });
    await stack.waitForRun(tenant.apiKey, run.body.id);
    const missingSession = await stack.request('GET', '/v1/sessions/ses_doesnotexist0000000', { key: other.apiKey });
    for (const [method, path] of [
      ['GET', `/v1/sessions/${session.body.id}`],
      ['GET', `/v1/sessions/${session.body.id}/messages`],
      ['DELETE', `/v1/sessions/${session.body.id}`],
      ['POST', `/v1/sessions/${session.body.id}/tools/terminal`],
      ['GET', `/v1/runs/${run.body.id}`],
    ]) {
      const res = await stack.request(method, path, { key: other.apiKey, body: method === 'POST' ? { arguments: { command: 'true' } } : undefined });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe(missingSession.body.error.code);
    }
    const crossRun = await stack.request('POST', '/v1/runs', { key: other.apiKey, body: { session_id: session.body.id, input: 'x' } });
    expect(crossRun.status).toBe(404);
    // The owner still sees it.
    expect((await stack.request('GET', `/v1/sessions/${session.body.id}`, { key: tenant.apiKey })).status).toBe(200);
  });

  it('ends the run failed with a readable error when the sandbox container dies mid-call', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    // Create the sandbox first, so the test can find and kill its container.
    await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
    const [container] = await docker.listContainers({ filters: { label: [`runbox.session=${session.body.id}`] } });
    model.enqueue({ toolCalls: [{ name: 'terminal', arguments: { command: 'touch started && sleep 60' } }] });
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: session.body.id, input: 'wait' } });
    // Calls on one sandbox run concurrently, so a direct call can watch the run's command start.
    await waitUntil(async () => {
      const probe = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/list_files`, { key: tenant.apiKey, body: { arguments: {} } });
      return probe.status === 200 && /started/.test(probe.body.output);
    });
    await docker.getContainer(container.Id).kill();
    const run = await stack.waitForRun(tenant.apiKey, created.body.id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/sandbox container died/);
    // The next call gets a fresh container on the same workspace volume.
    const next = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'ls started' } } });
    expect(next.status).toBe(200);
    expect(next.body.output).toContain('started');
  });

  it('ends the run failed with a readable error when no executor answers', async () => {
    await stack.stopExecutor();
    try {
      model.enqueue({ toolCalls: [{ name: 'terminal', arguments: { command: 'true' } }] });
      const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'x' } });
      const run = await stack.waitForRun(tenant.apiKey, created.body.id);
      expect(run.status).toBe('failed');
      expect(run.error).toMatch(/no executor is serving/);
    } finally {
      await stack.startExecutor();
    }
  });

  it('ends the run failed with a readable error when the model provider fails', async () => {
    model.enqueue({ status: 400, body: '{"error":{"message":"model not found: nope"}}' });
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'x', model: 'nope' } });
    const run = await stack.waitForRun(tenant.apiKey, created.body.id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/HTTP 400.*model not found/);
  });
});

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
