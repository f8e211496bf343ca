import { RecordedRequest, ScriptedModelServer } from '@app/testing';
import { hostname } from 'node:os';
import { McpToolSource } from '../apps/gateway/src/mcp/mcp-tool-source';
import { probeServerBundle } from './support/mcp-probe-server';
import { RunsClient } from './support/runs';
import { readRunEvents } from './support/sse';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * stdio MCP servers as tool sources of runs: a tenant's server registered through the API,
 * started by the gateway in the session's sandbox (the real executor, Docker, NATS and
 * Postgres), its tools called by a scripted model. The server is the SDK-built probe
 * server, written into the workspace first, as a tenant would ship one.
 */
describe('stdio MCP servers in runs', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let bundle: string;

  beforeAll(async () => {
    bundle = probeServerBundle();
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        // The probe server is one 1.8 MB file, written with one write_file call.
        RUNBOX_MAX_BODY_BYTES: String(8 * 1024 * 1024),
        RUNBOX_MAX_JSON_STRING_CHARS: String(4 * 1024 * 1024),
      },
    }).start();
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  async function addServer(tenant: TenantCredentials, body: Record<string, unknown>): Promise<void> {
    const res = await stack.request('POST', '/v1/mcp_servers', { key: tenant.apiKey, body });
    if (res.status !== 201) throw new Error(`POST /v1/mcp_servers answered ${res.status}: ${res.text}`);
  }

  /** A session of `tenant` whose workspace holds the probe server at mcp/server.js. */
  async function sessionWithServer(tenant: TenantCredentials, runs: RunsClient): Promise<string> {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    expect(session.status).toBe(201);
    expect((await runs.tool(session.body.id, 'write_file', { path: 'mcp/server.js', content: bundle })).is_error).toBe(false);
    return session.body.id;
  }

  /** The model's reply to a turn: what the tool call `callId` returned, so the run's output is that result. */
  const echoResult = (callId: string) => (req: RecordedRequest) => ({
    content: req.body.messages.find((m) => m.tool_call_id === callId)?.content ?? 'none',
  });

  const stdioConnections = (sessionId: string) => stack.gatewayApp.get(McpToolSource).connectionKeys().filter((key) => key.endsWith(`:${sessionId}`));

  it('calls a tenant’s stdio server inside the session’s sandbox from a run, and closes it when the session is deleted', async () => {
    const tenant = await stack.createTenant();
    const runs = new RunsClient(stack, tenant.apiKey);
    await addServer(tenant, { name: 'local', transport: 'stdio', command: 'node', args: ['mcp/server.js'] });
    const sessionId = await sessionWithServer(tenant, runs);

    model.enqueue({ toolCalls: [{ id: 'call_who', name: 'mcp__local__whoami', arguments: {} }] }, echoResult('call_who'));
    const { id } = await runs.start({ input: 'where do you run?', session_id: sessionId, tools: ['mcp__local', 'terminal'] });
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');

    const offered = ScriptedModelServer.offeredTools(model.requests[0]);
    expect(offered).toEqual(expect.arrayContaining(['mcp__local__whoami', 'mcp__local__echo', 'terminal']));
    const where = JSON.parse(run.output);
    const sandboxHost = (await runs.tool(sessionId, 'terminal', { command: 'hostname' })).output.split('stdout:\n')[1]?.trim();
    expect(where).toMatchObject({ uid: 1000, gid: 1000, hostname: sandboxHost, cwd: '/workspace' });
    expect(where.hostname).not.toBe(hostname());

    const events = await readRunEvents(stack.url, tenant.apiKey, id);
    const completed = events.find((e) => e.event === 'tool_call.completed');
    expect(completed?.data).toMatchObject({ tool_call_id: 'call_who', metadata: expect.objectContaining({ origin: 'mcp:local' }) });
    expect(events.filter((e) => e.event === 'mcp.server_failed')).toEqual([]);

    // The connection (and its process in the sandbox) is let go of with the session, not when it idles.
    expect(stdioConnections(sessionId)).toHaveLength(1);
    expect((await stack.request('DELETE', `/v1/sessions/${sessionId}`, { key: tenant.apiKey })).status).toBe(204);
    expect(stdioConnections(sessionId)).toEqual([]);
  });

  it('reports a stdio server whose command fails, and the run completes with the other tools', async () => {
    const tenant = await stack.createTenant();
    const runs = new RunsClient(stack, tenant.apiKey);
    await addServer(tenant, { name: 'broken', transport: 'stdio', command: 'node', args: ['-e', 'console.error("broken: no config"); process.exit(3)'] });

    model.enqueue({ toolCalls: [{ id: 'call_t', name: 'terminal', arguments: { command: 'echo still here' } }] }, echoResult('call_t'));
    const { id } = await runs.start({ input: 'go', tools: ['mcp__broken', 'terminal'] });
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');
    expect(run.output).toContain('still here');

    const failed = (await readRunEvents(stack.url, tenant.apiKey, id)).filter((e) => e.event === 'mcp.server_failed');
    expect(failed).toEqual([expect.objectContaining({ data: expect.objectContaining({ server: 'broken', error: expect.stringMatching(/exited with code 3.*broken: no config/s) }) })]);
    expect(ScriptedModelServer.offeredTools(model.requests[0]).filter((n) => n.startsWith('mcp__'))).toEqual([]);
  });

  it('never offers one tenant’s stdio server to another tenant’s run, nor runs it by name', async () => {
    const owner = await stack.createTenant();
    await addServer(owner, { name: 'local', transport: 'stdio', command: 'node', args: ['mcp/server.js'] });
    const stranger = await stack.createTenant();
    const runs = new RunsClient(stack, stranger.apiKey);
    // The stranger's workspace holds the same server: only the owner's registration could start it.
    const sessionId = await sessionWithServer(stranger, runs);

    model.enqueue({ toolCalls: [{ id: 'call_x', name: 'mcp__local__whoami', arguments: {} }] }, echoResult('call_x'));
    const { id } = await runs.start({ input: 'go', session_id: sessionId, toolset: 'all' });
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');

    expect(ScriptedModelServer.offeredTools(model.requests[0]).filter((n) => n.startsWith('mcp__'))).toEqual([]);
    expect(run.output).not.toContain('"uid"');
    const events = await readRunEvents(stack.url, stranger.apiKey, id);
    expect(events.filter((e) => e.event === 'mcp.server_failed')).toEqual([]);
    expect(stdioConnections(sessionId)).toEqual([]);
    const processes = (await runs.tool(sessionId, 'terminal', { command: 'ps -eo args' })).output;
    expect(processes).not.toContain('mcp/server.js');
  });
});
