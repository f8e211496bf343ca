import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import { freePort, queryDatabase, RecordedRequest, ScriptedModelServer } from '@app/testing';
import { mcpSecretsAad } from '../apps/gateway/src/mcp/mcp-secrets';
import { rotateMcpSecrets } from '../apps/gateway/src/mcp/mcp-secrets-rotation';
import { LONG_TOOL_NAME, McpFixtureServer } from './support/mcp-fixture-server';
import { eventually, RunsClient } from './support/runs';
import { readRunEvents } from './support/sse';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * MCP servers as tool sources, end to end: a real MCP server (the SDK's, over streamable
 * HTTP on loopback, allowed by RUNBOX_ALLOW_PRIVATE_HOSTS), runs driven by the scripted model,
 * the real Postgres and NATS. Each describe block's tenant has its own servers, so one
 * scenario's connection (and its tool list) never leaks into another's.
 */
describe('MCP servers', () => {
  const mcp = new McpFixtureServer();
  const model = new ScriptedModelServer();
  /** Listens on a loopback port that is NOT allowed: the egress guard must refuse it unasked. */
  let forbidden: Server;
  let forbiddenHits = 0;
  let deadPort: number;
  let stack: TestStack;
  const TOKEN = `secret-token-${randomBytes(8).toString('hex')}`;

  beforeAll(async () => {
    await mcp.start();
    const modelUrl = await model.start();
    forbidden = createServer((_req, res) => {
      forbiddenHits++;
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => forbidden.listen(0, '127.0.0.1', resolve));
    // Nothing listens here: a server that refuses the connection.
    deadPort = await freePort();
    stack = await new TestStack({
      executor: false,
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_CREDENTIALS_KEY: randomBytes(32).toString('base64'),
        RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${mcp.port},127.0.0.1:${deadPort}`,
      },
    }).start();
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await mcp.stop();
    await new Promise<void>((resolve) => (forbidden ? forbidden.close(() => resolve()) : resolve()));
  });

  beforeEach(() => model.reset());

  const api = (tenant: TenantCredentials, method: string, path: string, body?: unknown) => stack.request(method, path, { key: tenant.apiKey, body });

  async function addServer(tenant: TenantCredentials, body: Record<string, unknown>): Promise<{ id: string; name: string }> {
    const res = await api(tenant, 'POST', '/v1/mcp_servers', body);
    if (res.status !== 201) throw new Error(`POST /v1/mcp_servers answered ${res.status}: ${res.text}`);
    return res.body;
  }

  /** The model's reply to a turn: what the tool call `callId` returned, so the run's output is that result. */
  const echoResult = (callId: string) => (req: RecordedRequest) => ({
    content: req.body.messages.find((m) => m.tool_call_id === callId)?.content ?? 'none',
  });

  describe('API', () => {
    let tenant: TenantCredentials;
    beforeAll(async () => {
      tenant = await stack.createTenant();
    });

    it('stores headers sealed, shows only their names, and takes changes', async () => {
      const created = await api(tenant, 'POST', '/v1/mcp_servers', { name: 'docs', transport: 'streamable_http', url: mcp.url, headers: { Authorization: `Bearer ${TOKEN}` } });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name: 'docs', transport: 'streamable_http', url: mcp.url, header_names: ['Authorization'], status: 'unknown', last_error: null });
      expect(created.text).not.toContain(TOKEN);

      const [row] = await queryDatabase<{ secrets: string }>(stack.db.url, 'SELECT secrets FROM mcp_servers WHERE id = $1', [created.body.id]);
      expect(row.secrets).toMatch(/^v1\./);
      expect(row.secrets).not.toContain(TOKEN);
      expect(Buffer.from(row.secrets.split('.')[4], 'base64url').toString('latin1')).not.toContain(TOKEN);

      for (const res of [await api(tenant, 'GET', '/v1/mcp_servers'), await api(tenant, 'GET', `/v1/mcp_servers/${created.body.id}`)]) {
        expect(res.status).toBe(200);
        expect(res.text).toContain('Authorization');
        expect(res.text).not.toContain(TOKEN);
      }

      const renamed = await api(tenant, 'PATCH', `/v1/mcp_servers/${created.body.id}`, { name: 'docs2', headers: { 'X-Api-Key': 'another-secret-value' } });
      expect(renamed.status).toBe(200);
      expect(renamed.body).toMatchObject({ name: 'docs2', header_names: ['X-Api-Key'] });
      expect(renamed.text).not.toContain('another-secret-value');

      const stdio = await api(tenant, 'POST', '/v1/mcp_servers', { name: 'files', transport: 'stdio', command: 'npx', args: ['-y', 'some-server'], env: { API_TOKEN: TOKEN } });
      expect(stdio.status).toBe(201);
      expect(stdio.body).toMatchObject({ transport: 'stdio', command: 'npx', args: ['-y', 'some-server'], env_names: ['API_TOKEN'] });
      expect(stdio.text).not.toContain(TOKEN);

      expect((await api(tenant, 'POST', '/v1/mcp_servers', { name: 'docs2', transport: 'streamable_http', url: mcp.url })).status).toBe(409);
      expect((await api(tenant, 'DELETE', `/v1/mcp_servers/${created.body.id}`)).status).toBe(204);
      expect((await api(tenant, 'GET', `/v1/mcp_servers/${created.body.id}`)).status).toBe(404);
      expect((await api(tenant, 'DELETE', `/v1/mcp_servers/${stdio.body.id}`)).status).toBe(204);
    });

    it('refuses bad input with a 400 naming the field', async () => {
      const bad: Array<[unknown, string]> = [
        [{ name: 'has space', transport: 'streamable_http', url: mcp.url }, 'name'],
        [{ name: 'a__b', transport: 'streamable_http', url: mcp.url }, 'name'],
        [{ name: 'x'.repeat(33), transport: 'streamable_http', url: mcp.url }, 'name'],
        [{ name: 'ok', transport: 'streamable_http' }, 'url'],
        [{ name: 'ok', transport: 'streamable_http', url: 'ftp://example.com/mcp' }, 'url'],
        [{ name: 'ok', transport: 'streamable_http', url: mcp.url, headers: { 'X-A': 'line\nbreak' } }, 'headers'],
        [{ name: 'ok', transport: 'carrier_pigeon', url: mcp.url }, 'transport'],
        [{ name: 'ok', transport: 'stdio' }, 'command'],
        [{ name: 'ok', transport: 'stdio', command: 'npx', url: mcp.url }, 'url'],
      ];
      for (const [body, field] of bad) {
        const res = await api(tenant, 'POST', '/v1/mcp_servers', body);
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
        expect(res.body.error).toMatchObject({ code: expect.any(String), message: expect.stringContaining(field) });
      }
      const server = await addServer(tenant, { name: 'patchme', transport: 'streamable_http', url: mcp.url });
      const wrongTransport = await api(tenant, 'PATCH', `/v1/mcp_servers/${server.id}`, { command: 'npx' });
      expect(wrongTransport.status).toBe(400);
      expect(wrongTransport.body.error.message).toContain('command');
      expect((await api(tenant, 'GET', '/v1/mcp_servers/not-an-id')).status).toBe(404);
      expect((await api(tenant, 'DELETE', `/v1/mcp_servers/${server.id}`)).status).toBe(204);
    });
  });

  describe('runs', () => {
    let tenant: TenantCredentials;
    let runs: RunsClient;
    let serverId: string;
    beforeAll(async () => {
      tenant = await stack.createTenant();
      runs = new RunsClient(stack, tenant.apiKey);
      serverId = (await addServer(tenant, { name: 'fixture', transport: 'streamable_http', url: mcp.url, headers: { Authorization: `Bearer ${TOKEN}` } })).id;
    });

    it('calls a read-only tool without asking, sending the stored header, and marks the result as the server’s', async () => {
      model.enqueue({ toolCalls: [{ id: 'call_e', name: 'mcp__fixture__echo', arguments: { text: 'hello' } }] }, echoResult('call_e'));
      const { id } = await runs.start({ input: 'echo', tools: ['mcp__fixture'], approval_mode: 'prompt' });
      const run = await runs.wait(id, ['completed', 'failed', 'requires_approval']);
      expect(run.status).toBe('completed');
      expect(run.output).toBe('echo: hello');
      expect(ScriptedModelServer.offeredTools(model.requests[0])).toEqual(expect.arrayContaining(['mcp__fixture__echo', 'mcp__fixture__write_note']));
      const completed = (await readRunEvents(stack.url, tenant.apiKey, id)).find((e) => e.event === 'tool_call.completed');
      expect(completed?.data.metadata).toMatchObject({ origin: 'mcp:fixture' });
      expect(mcp.requests.some((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);

      const server = await api(tenant, 'GET', `/v1/mcp_servers/${serverId}`);
      expect(server.body).toMatchObject({ status: 'ok', last_error: null, last_success_at: expect.any(String) });
    });

    it('asks before a tool without readOnlyHint under approval_mode prompt, and runs it once approved', async () => {
      const before = mcp.notes.length;
      model.enqueue({ toolCalls: [{ id: 'call_w', name: 'mcp__fixture__write_note', arguments: { note: 'remember the milk' } }] }, echoResult('call_w'));
      const { id } = await runs.start({ input: 'note it', tools: ['mcp__fixture'], approval_mode: 'prompt' });
      const waiting = await runs.wait(id, ['requires_approval', 'completed', 'failed']);
      expect(waiting.status).toBe('requires_approval');
      expect(waiting.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_w', name: 'mcp__fixture__write_note' })]);
      expect(mcp.notes.length).toBe(before);

      expect((await runs.decide(id, { tool_call_id: 'call_w', decision: 'approve' })).status).toBe(200);
      const run = await runs.wait(id);
      expect(run.status).toBe('completed');
      expect(mcp.notes.slice(before)).toEqual(['remember the milk']);
      // Text content, then the structured content as JSON.
      expect(run.output).toBe(`kept note ${before + 1}\n{"kept":${before + 1}}`);
    });

    it('refuses a tool without readOnlyHint under approval_mode deny', async () => {
      const before = mcp.notes.length;
      model.enqueue({ toolCalls: [{ id: 'call_d', name: 'mcp__fixture__write_note', arguments: { note: 'no' } }] }, echoResult('call_d'));
      const { id } = await runs.start({ input: 'note it', tools: ['mcp__fixture'], approval_mode: 'deny' });
      const run = await runs.wait(id);
      expect(run.output).toMatch(/^refused/);
      expect(mcp.notes.length).toBe(before);
    });

    it('ends a slow call at its time limit with an error result, and the run goes on', async () => {
      model.enqueue(
        { toolCalls: [{ id: 'call_s', name: 'mcp__fixture__slow', arguments: { ms: 30_000 } }] },
        { toolCalls: [{ id: 'call_after', name: 'mcp__fixture__echo', arguments: { text: 'still here' } }] },
        (req) => ({ content: req.body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join(' | ') }),
      );
      const started = Date.now();
      const { id } = await runs.start({ input: 'slow', tools: ['mcp__fixture'], limits: { timeouts: { mcp__fixture__slow: 1 } } });
      const run = await runs.wait(id);
      expect(run.status).toBe('completed');
      expect(run.output).toMatch(/^slow did not answer within 1 s \| echo: still here$/);
      expect(Date.now() - started).toBeLessThan(30_000);
    });

    it('starts a new session with a server that restarted, without failing the call', async () => {
      // A first call makes sure the gateway holds a session, which the restart then forgets.
      model.enqueue({ toolCalls: [{ id: 'call_r1', name: 'mcp__fixture__echo', arguments: { text: 'before' } }] }, echoResult('call_r1'));
      await runs.wait((await runs.start({ input: 'before', tools: ['mcp__fixture'] })).id);
      await mcp.forgetSessions();
      model.reset();
      model.enqueue({ toolCalls: [{ id: 'call_r2', name: 'mcp__fixture__echo', arguments: { text: 'after' } }] }, echoResult('call_r2'));
      const { id } = await runs.start({ input: 'after', tools: ['mcp__fixture'] });
      const run = await runs.wait(id);
      expect(run.output).toBe('echo: after');
      expect((await api(tenant, 'GET', `/v1/mcp_servers/${serverId}`)).body).toMatchObject({ status: 'ok', last_error: null });
    });

    it('offers a long tool name shortened and calls the original tool by it', async () => {
      model.enqueue({ content: 'looking' });
      const probe = await runs.start({ input: 'list', tools: ['mcp__fixture'] });
      await runs.wait(probe.id);
      const shortened = ScriptedModelServer.offeredTools(model.requests[0]).find((n) => n.startsWith('mcp__fixture__summarize'));
      expect(shortened).toBeDefined();
      expect(shortened!.length).toBeLessThanOrEqual(64);
      expect(shortened).not.toBe(`mcp__fixture__${LONG_TOOL_NAME}`);
      expect(shortened).toMatch(/^[a-zA-Z0-9_-]+$/);

      model.reset();
      model.enqueue({ toolCalls: [{ id: 'call_l', name: shortened!, arguments: {} }] }, echoResult('call_l'));
      const { id } = await runs.start({ input: 'long', tools: [shortened!] });
      const run = await runs.wait(id);
      expect(run.output).toBe('the long-named tool ran');
      const catalogue = (await api(tenant, 'GET', '/v1/tools')).body.data as Array<{ name: string; origin?: string; mutating: boolean }>;
      expect(catalogue.find((t) => t.name === shortened)).toMatchObject({ origin: 'mcp:fixture', mutating: false });
      expect(catalogue.find((t) => t.name === 'mcp__fixture__write_note')).toMatchObject({ mutating: true });
    });
  });

  describe('servers from before streamable HTTP', () => {
    it('are reached over HTTP+SSE when streamable HTTP is refused', async () => {
      const tenant = await stack.createTenant();
      const runs = new RunsClient(stack, tenant.apiKey);
      await addServer(tenant, { name: 'legacy', transport: 'streamable_http', url: mcp.legacyUrl });
      model.enqueue({ toolCalls: [{ id: 'call_old', name: 'mcp__legacy__echo', arguments: { text: 'over sse' } }] }, echoResult('call_old'));
      const { id } = await runs.start({ input: 'old', tools: ['mcp__legacy'] });
      const run = await runs.wait(id);
      expect(run.output).toBe('echo: over sse');
    });
  });

  describe('list_changed', () => {
    it('offers a tool the server added from the next model turn on', async () => {
      const tenant = await stack.createTenant();
      const runs = new RunsClient(stack, tenant.apiKey);
      await addServer(tenant, { name: 'growing', transport: 'streamable_http', url: mcp.url });
      model.enqueue(
        { toolCalls: [{ id: 'call_g', name: 'mcp__growing__grow', arguments: {} }] },
        { toolCalls: [{ id: 'call_f', name: 'mcp__growing__fresh_tool', arguments: {} }] },
        echoResult('call_f'),
      );
      const { id } = await runs.start({ input: 'grow', tools: ['mcp__growing'] });
      const run = await runs.wait(id);
      expect(ScriptedModelServer.offeredTools(model.requests[0])).not.toContain('mcp__growing__fresh_tool');
      expect(ScriptedModelServer.offeredTools(model.requests[1])).toContain('mcp__growing__fresh_tool');
      expect(run.output).toBe('fresh_tool ran');
    });
  });

  describe('failing servers', () => {
    it('reports a server that refuses the connection as mcp.server_failed, and the run goes on with the other tools', async () => {
      const tenant = await stack.createTenant();
      const runs = new RunsClient(stack, tenant.apiKey);
      const broken = await addServer(tenant, { name: 'broken', transport: 'streamable_http', url: `http://127.0.0.1:${deadPort}/mcp` });
      await addServer(tenant, { name: 'fixture', transport: 'streamable_http', url: mcp.url });
      model.enqueue({ toolCalls: [{ id: 'call_ok', name: 'mcp__fixture__echo', arguments: { text: 'fine' } }] }, echoResult('call_ok'));
      const { id } = await runs.start({ input: 'go', toolset: 'all' });
      const run = await runs.wait(id);
      expect(run.status).toBe('completed');
      expect(run.output).toBe('echo: fine');
      const offered = ScriptedModelServer.offeredTools(model.requests[0]);
      expect(offered).toContain('mcp__fixture__echo');
      expect(offered.filter((n) => n.startsWith('mcp__broken'))).toEqual([]);

      const events = await readRunEvents(stack.url, tenant.apiKey, id);
      const failed = events.filter((e) => e.event === 'mcp.server_failed');
      // Once per run, though the run listed its tools before each of its two turns.
      expect(failed).toHaveLength(1);
      expect(failed[0].data).toMatchObject({ server: 'broken', error: expect.stringMatching(/ECONNREFUSED|refused/i) });

      const shown = await eventually('the failure recorded', async () => {
        const res = await api(tenant, 'GET', `/v1/mcp_servers/${broken.id}`);
        return res.body.status === 'failing' ? res.body : undefined;
      });
      expect(shown).toMatchObject({ last_error: expect.stringMatching(/refused/i), last_error_at: expect.any(String), last_success_at: null });
    });

    it('never connects to a private address that RUNBOX_ALLOW_PRIVATE_HOSTS does not allow', async () => {
      const tenant = await stack.createTenant();
      const runs = new RunsClient(stack, tenant.apiKey);
      const port = (forbidden.address() as AddressInfo).port;
      await addServer(tenant, { name: 'inside', transport: 'streamable_http', url: `http://127.0.0.1:${port}/mcp` });
      model.enqueue({ content: 'done' });
      const { id } = await runs.start({ input: 'go', toolset: 'all' });
      expect((await runs.wait(id)).status).toBe('completed');
      const failed = (await readRunEvents(stack.url, tenant.apiKey, id)).filter((e) => e.event === 'mcp.server_failed');
      expect(failed).toEqual([expect.objectContaining({ data: expect.objectContaining({ server: 'inside', error: expect.stringContaining('loopback address') }) })]);
      expect(forbiddenHits).toBe(0);
    });

    it('reports a stdio server as failed when no executor serves sandboxes, and the run completes', async () => {
      const tenant = await stack.createTenant();
      const runs = new RunsClient(stack, tenant.apiKey);
      await addServer(tenant, { name: 'local', transport: 'stdio', command: 'npx', args: ['some-server'] });
      model.enqueue({ content: 'done' });
      const { id } = await runs.start({ input: 'go', toolset: 'all' });
      expect((await runs.wait(id)).status).toBe('completed');
      const failed = (await readRunEvents(stack.url, tenant.apiKey, id)).filter((e) => e.event === 'mcp.server_failed');
      expect(failed).toEqual([expect.objectContaining({ data: expect.objectContaining({ server: 'local', error: expect.stringContaining('no executor is serving sandboxes') }) })]);
    });
  });

  describe('tenants', () => {
    it('never see each other’s servers: in the API, in GET /v1/tools, or in runs', async () => {
      const alice = await stack.createTenant();
      const bob = await stack.createTenant();
      const alices = await addServer(alice, { name: 'alicetools', transport: 'streamable_http', url: mcp.url });
      await addServer(bob, { name: 'bobtools', transport: 'streamable_http', url: mcp.url });

      expect((await api(bob, 'GET', `/v1/mcp_servers/${alices.id}`)).status).toBe(404);
      expect((await api(bob, 'PATCH', `/v1/mcp_servers/${alices.id}`, { name: 'mine' })).status).toBe(404);
      expect((await api(bob, 'DELETE', `/v1/mcp_servers/${alices.id}`)).status).toBe(404);
      expect((await api(bob, 'GET', '/v1/mcp_servers')).body.data.map((s: { name: string }) => s.name)).toEqual(['bobtools']);

      const names = async (t: TenantCredentials) => ((await api(t, 'GET', '/v1/tools')).body.data as Array<{ name: string }>).map((x) => x.name).filter((n) => n.startsWith('mcp__'));
      expect((await names(alice)).every((n) => n.startsWith('mcp__alicetools__'))).toBe(true);
      expect(await names(alice)).toContain('mcp__alicetools__echo');
      expect((await names(bob)).every((n) => n.startsWith('mcp__bobtools__'))).toBe(true);

      // Bob's run neither is offered Alice's tools nor can call them by name.
      model.enqueue({ toolCalls: [{ id: 'call_x', name: 'mcp__alicetools__echo', arguments: { text: 'steal' } }] }, echoResult('call_x'));
      const bobRuns = new RunsClient(stack, bob.apiKey);
      const { id } = await bobRuns.start({ input: 'go', toolset: 'all' });
      const run = await bobRuns.wait(id);
      const offered = ScriptedModelServer.offeredTools(model.requests[0]);
      expect(offered).toContain('mcp__bobtools__echo');
      expect(offered.filter((n) => n.startsWith('mcp__alicetools'))).toEqual([]);
      expect(run.output).not.toContain('echo: steal');
    });
  });

  // Last: it re-seals every tenant's values with a key this gateway does not have.
  describe('key rotation', () => {
    it('re-seals headers and env with a new key during a rotation', async () => {
      const owner = await stack.createTenant();
      const sealedWith = { ...(await addServer(owner, { name: 'rotating', transport: 'streamable_http', url: mcp.url, headers: { Authorization: `Bearer ${TOKEN}` } })), tenantId: owner.tenantId };
      const oldKey = stack.config.RUNBOX_CREDENTIALS_KEY!;
      const newKey = randomBytes(32).toString('base64');
      const db = new PrismaService({ url: stack.db.appUrl, systemUrl: stack.db.url });
      try {
        const report = await rotateMcpSecrets(db, new CredentialCipher(newKey, [oldKey]));
        expect(report.resealed).toBeGreaterThanOrEqual(1);
        const [row] = await queryDatabase<{ secrets: string }>(stack.db.url, 'SELECT secrets FROM mcp_servers WHERE id = $1', [sealedWith.id]);
        expect(JSON.parse(new CredentialCipher(newKey).open(row.secrets, mcpSecretsAad(sealedWith.tenantId, sealedWith.id)))).toEqual({ headers: { Authorization: `Bearer ${TOKEN}` }, env: {} });
        expect(await rotateMcpSecrets(db, new CredentialCipher(newKey, [oldKey]))).toMatchObject({ resealed: 0, skipped: 0 });
      } finally {
        await db.close();
      }
    });
  });
});
