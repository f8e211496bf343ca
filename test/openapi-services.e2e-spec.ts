import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import { queryDatabase, ScriptedModelServer } from '@app/testing';
import { rotateOpenApiCredentials } from '../apps/gateway/src/openapi/openapi-credential-rotation';
import { serviceAuthAad } from '../apps/gateway/src/openapi/openapi-services.service';
import { OpenApiFixtureServer, PETSTORE_DOCUMENT } from './support/openapi-fixture-server';
import { RunsClient } from './support/runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * OpenAPI services as tools, end to end: a pet store on loopback serves its document and
 * its API; services are registered by URL and inline; a scripted run calls the GET
 * operation without asking and the POST one after approval; calls go only to the
 * document's server, through the egress guard; tenants never see each other's services;
 * the credential is sealed at rest and kept out of answers and logs.
 */
describe('OpenAPI services', () => {
  const store = new OpenApiFixtureServer();
  /** A second server the egress guard does not allow: nothing may reach it. */
  const forbidden = new OpenApiFixtureServer();
  const model = new ScriptedModelServer();
  const logDir = mkdtempSync(join(tmpdir(), 'runbox-openapi-'));
  const logFile = join(logDir, 'services.log');
  const token = `tok-${randomBytes(12).toString('hex')}`;
  const answers: string[] = [];
  let stack: TestStack;
  let acme: TenantCredentials;
  let globex: TenantCredentials;
  let petstoreId = '';

  const request = async (...args: Parameters<TestStack['request']>) => {
    const res = await stack.request(...args);
    answers.push(res.text);
    return res;
  };
  const register = (tenant: TenantCredentials, body: Record<string, unknown>) => request('POST', '/v1/openapi_services', { key: tenant.apiKey, body });
  const session = async (tenant: TenantCredentials) => (await request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
  const direct = async (tenant: TenantCredentials, sessionId: string, name: string, args: Record<string, unknown>) => {
    const res = await request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });
    return res;
  };
  /** The model's next turn repeats the result of `callId`, so the run's output shows it. */
  const echo = (callId: string) => (req: { body: { messages: Array<{ tool_call_id?: string; content: string | null }> } }) => ({
    content: req.body.messages.find((m) => m.tool_call_id === callId)?.content ?? 'no result',
  });

  beforeAll(async () => {
    await Promise.all([store.start(), forbidden.start()]);
    store.awayUrl = `${forbidden.origin}/api/pets/1`;
    const modelUrl = await model.start();
    stack = await new TestStack({
      executor: false,
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${store.port}`,
        RUNBOX_CREDENTIALS_KEY: randomBytes(32).toString('base64'),
        RUNBOX_LOG_FILE: logFile,
        RUNBOX_LOG_LEVEL: 'trace',
      },
    }).start();
    [acme, globex] = await Promise.all([stack.createTenant(), stack.createTenant()]);
    const created = await register(acme, { name: 'petstore', spec_url: `${store.origin}/openapi.json`, auth: { type: 'bearer', token } });
    expect(created.status).toBe(201);
    petstoreId = created.body.id;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await Promise.all([store.stop(), forbidden.stop()]);
    rmSync(logDir, { recursive: true, force: true });
  });

  beforeEach(() => model.reset());

  it('registers by spec_url: the relative server resolves against it, each operation is a tool, the credential is not shown', async () => {
    const res = await request('GET', `/v1/openapi_services/${petstoreId}`, { key: acme.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: petstoreId,
      name: 'petstore',
      title: 'Fixture pet store',
      spec_url: `${store.origin}/openapi.json`,
      server: `${store.origin}/api`,
      auth: { type: 'bearer' },
    });
    expect(res.body.tools).toEqual([
      { name: 'petstore__getPet', operation_id: 'getPet', method: 'GET', path: '/pets/{petId}', mutating: false },
      { name: 'petstore__createPet', operation_id: 'createPet', method: 'POST', path: '/pets', mutating: true },
      { name: 'petstore__slow', operation_id: 'slow', method: 'GET', path: '/slow', mutating: false },
      { name: 'petstore__away', operation_id: 'away', method: 'GET', path: '/away', mutating: false },
    ]);
    const tools = (await request('GET', '/v1/tools', { key: acme.apiKey })).body.data as Array<Record<string, unknown>>;
    expect(tools.find((t) => t.name === 'petstore__createPet')).toMatchObject({
      origin: 'openapi:petstore',
      mutating: true,
      description: 'Add a pet (POST /pets on the OpenAPI service petstore)',
      parameters: {
        type: 'object',
        properties: { body: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, tag: { type: 'string' } } } },
        required: ['body'],
      },
    });
    const list = await request('GET', '/v1/openapi_services', { key: acme.apiKey });
    expect(list.body.data.map((s: { name: string }) => s.name)).toEqual(['petstore']);
  });

  it('registers YAML by URL and JSON inline, only the chosen operations', async () => {
    const yaml = await register(acme, { name: 'yamlstore', spec_url: `${store.origin}/openapi.yaml` });
    expect(yaml.status).toBe(201);
    expect(yaml.body).toMatchObject({ title: 'Fixture pet store (YAML)', server: `${store.origin}/api`, auth: null, tools: [{ name: 'yamlstore__getPet' }] });
    const inline = await register(acme, {
      name: 'inline-store',
      spec: { ...PETSTORE_DOCUMENT, servers: [{ url: `${store.origin}/api` }] },
      operations: ['createPet'],
      auth: { type: 'header', name: 'X-Api-Key', value: token },
    });
    expect(inline.status).toBe(201);
    expect(inline.body.tools.map((t: { name: string }) => t.name)).toEqual(['inline-store__createPet']);
    expect(inline.body.auth).toEqual({ type: 'header' });

    const sessionId = await session(acme);
    const called = await direct(acme, sessionId, 'inline-store__createPet', { body: { name: 'Inline' } });
    expect(called.body).toMatchObject({ is_error: false, metadata: { origin: 'openapi:inline-store', status: 201 } });
    const last = store.apiCalls.at(-1)!;
    expect(last).toMatchObject({ method: 'POST', path: '/api/pets', body: '{"name":"Inline"}' });
    expect(last.headers['x-api-key']).toBe(token);
    expect(last.headers.authorization).toBeUndefined();
    for (const name of ['yamlstore', 'inline-store']) {
      const id = (await request('GET', '/v1/openapi_services', { key: acme.apiKey })).body.data.find((s: { name: string }) => s.name === name).id;
      expect((await request('DELETE', `/v1/openapi_services/${id}`, { key: acme.apiKey })).status).toBe(204);
    }
    const names = (await request('GET', '/v1/tools', { key: acme.apiKey })).body.data.map((t: { name: string }) => t.name);
    expect(names).not.toContain('inline-store__createPet');
    expect(names).not.toContain('yamlstore__getPet');
  });

  it('a run calls the GET operation without asking and the POST one after approval, with the credential', async () => {
    const runs = new RunsClient(stack, acme.apiKey);
    model.enqueue(
      { toolCalls: [{ id: 'call_get', name: 'petstore__getPet', arguments: { petId: 'rex 1/2', verbose: true, 'X-Trace': 'trace-7' } }] },
      { toolCalls: [{ id: 'call_post', name: 'petstore__createPet', arguments: { body: { name: 'Rex', tag: 'dog' } } }] },
      (req) => ({ content: ['call_get', 'call_post'].map((id) => req.body.messages.find((m) => m.tool_call_id === id)?.content ?? 'none').join('\n---\n') }),
    );
    const before = store.apiCalls.length;
    const { id } = await runs.start({ input: 'look after the pets', tools: ['petstore'], approval_mode: 'prompt' });
    const waiting = await runs.wait(id, ['requires_approval', 'completed', 'failed']);
    expect(waiting.status).toBe('requires_approval');
    expect(waiting.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_post', name: 'petstore__createPet' })]);
    // The group name admitted every operation of the service, offered with its schema.
    const offered = model.requests[0].body.tools ?? [];
    expect(offered.map((t) => t.function.name).sort()).toEqual(['petstore__away', 'petstore__createPet', 'petstore__getPet', 'petstore__slow']);
    expect(offered.find((t) => t.function.name === 'petstore__getPet')?.function.parameters).toMatchObject({ required: ['petId'], properties: { verbose: { type: 'boolean' } } });
    // …and run.started does not call the group name unknown.
    const [started] = await queryDatabase<{ data: { tools: Array<{ name: string; source: string }>; tools_dropped: unknown[] } }>(
      stack.db.url,
      "SELECT data FROM run_events WHERE run_id = $1 AND type = 'run.started'",
      [id],
    );
    expect(started.data.tools_dropped).toEqual([]);
    expect(started.data.tools).toContainEqual({ name: 'petstore__createPet', source: 'tools:petstore' });
    // The GET ran without asking; the POST has not been sent.
    expect(store.apiCalls.slice(before).map((c) => `${c.method} ${c.path}`)).toEqual(['GET /api/pets/rex%201%2F2?verbose=true']);
    const get = store.apiCalls[before];
    expect(get.headers.authorization).toBe(`Bearer ${token}`);
    expect(get.headers['x-trace']).toBe('trace-7');

    expect((await runs.decide(id, { tool_call_id: 'call_post', decision: 'approve' })).status).toBe(200);
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');
    const post = store.apiCalls.slice(before)[1];
    expect(post).toMatchObject({ method: 'POST', path: '/api/pets' });
    expect(JSON.parse(post.body)).toEqual({ name: 'Rex', tag: 'dog' });
    expect(post.headers.authorization).toBe(`Bearer ${token}`);
    expect(post.headers['content-type']).toBe('application/json');
    expect(run.output).toContain('HTTP 200');
    expect(run.output).toContain('"name": "Pet rex 1/2"');
    expect(run.output).toContain('"verbose": "true"');
    expect(run.output).toContain('HTTP 201');
    expect(run.output).toContain('HTTP 201\n\n{\n  "created": {\n    "tag": "dog",\n    "name": "Rex"\n  }\n}');
  });

  it('deny refuses the POST operation without sending it', async () => {
    const runs = new RunsClient(stack, acme.apiKey);
    model.enqueue({ toolCalls: [{ id: 'call_deny', name: 'petstore__createPet', arguments: { body: { name: 'Nope' } } }] }, echo('call_deny'));
    const before = store.apiCalls.length;
    const { id } = await runs.start({ input: 'add a pet', tools: ['petstore__createPet'], approval_mode: 'deny' });
    const run = await runs.wait(id);
    expect(run.output).toMatch(/^refused: petstore__createPet/);
    expect(store.apiCalls.length).toBe(before);
  });

  it('reports HTTP errors with their status and at most 2 KB of body, and bad arguments before sending', async () => {
    const sessionId = await session(acme);
    const failed = await direct(acme, sessionId, 'petstore__getPet', { petId: 'broken' });
    expect(failed.status).toBe(200);
    expect(failed.body.is_error).toBe(true);
    expect(failed.body.output).toMatch(/^HTTP 503 from getPet\n\n\{"error":"the pet store is closed"/);
    expect(failed.body.output).toContain('… (body cut at 2 KB)');
    expect(failed.body.output.length).toBeLessThan(2200);

    const before = store.apiCalls.length;
    const missing = await direct(acme, sessionId, 'petstore__getPet', { verbose: true });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toContain('arguments.petId: required');
    const dots = await direct(acme, sessionId, 'petstore__getPet', { petId: '..' });
    expect(dots.body).toMatchObject({ is_error: true, output: expect.stringContaining('".." is not a path value') });
    expect(store.apiCalls.length).toBe(before);
  });

  it('stops at the run’s timeout for the operation', async () => {
    const runs = new RunsClient(stack, acme.apiKey);
    model.enqueue({ toolCalls: [{ id: 'call_slow', name: 'petstore__slow', arguments: {} }] }, echo('call_slow'));
    const { id } = await runs.start({ input: 'wait', tools: ['petstore__slow'], limits: { timeouts: { petstore__slow: 1 } } });
    const run = await runs.wait(id);
    expect(run.output).toBe(`Could not call slow at ${store.origin}/api/slow: no complete answer within 1 s`);
  });

  it('does not follow a redirect away from the service’s server', async () => {
    const sessionId = await session(acme);
    const res = await direct(acme, sessionId, 'petstore__away', {});
    expect(res.body).toMatchObject({ is_error: true, metadata: { status: 302 } });
    expect(res.body.output).toContain("redirecting outside the service's server");
    expect(forbidden.calls).toEqual([]);
  });

  it('refuses calls to a server the egress guard does not allow, sending nothing', async () => {
    const created = await register(acme, { name: 'private', spec: { ...PETSTORE_DOCUMENT, servers: [{ url: `${forbidden.origin}/api` }] }, auth: { type: 'bearer', token } });
    expect(created.status).toBe(201);
    const sessionId = await session(acme);
    const res = await direct(acme, sessionId, 'private__getPet', { petId: '1' });
    expect(res.body.is_error).toBe(true);
    expect(res.body.output).toMatch(new RegExp(`^Refused to call getPet at ${forbidden.origin}/api/pets/1: `));
    // Fetching a document from there is refused the same way.
    const byUrl = await register(acme, { name: 'private2', spec_url: `${forbidden.origin}/openapi.json` });
    expect(byUrl.status).toBe(400);
    expect(byUrl.body.error.message).toMatch(/^body\.spec_url: could not fetch the document: /);
    expect(forbidden.calls).toEqual([]);
    expect((await request('DELETE', `/v1/openapi_services/${created.body.id}`, { key: acme.apiKey })).status).toBe(204);
  });

  it("keeps tenants' services apart", async () => {
    expect((await request('GET', '/v1/openapi_services', { key: globex.apiKey })).body.data).toEqual([]);
    expect((await request('GET', `/v1/openapi_services/${petstoreId}`, { key: globex.apiKey })).status).toBe(404);
    expect((await request('DELETE', `/v1/openapi_services/${petstoreId}`, { key: globex.apiKey })).status).toBe(404);
    const tools = (await request('GET', '/v1/tools', { key: globex.apiKey })).body.data.map((t: { name: string }) => t.name);
    expect(tools.filter((n: string) => n.startsWith('petstore'))).toEqual([]);
    const sessionId = await session(globex);
    const before = store.apiCalls.length;
    expect((await direct(globex, sessionId, 'petstore__getPet', { petId: '1' })).status).toBe(404);
    expect(store.apiCalls.length).toBe(before);
    // The name is the other tenant's own to use.
    const own = await register(globex, { name: 'petstore', spec_url: `${store.origin}/openapi.yaml` });
    expect(own.status).toBe(201);
    expect(own.body.auth).toBeNull();
    const res = await direct(globex, sessionId, 'petstore__getPet', { petId: 'g' });
    expect(res.body).toMatchObject({ is_error: false });
    expect(store.apiCalls.at(-1)!.headers.authorization).toBeUndefined();
  });

  it('refuses bad documents, bad input and bad names with a 400 that says why', async () => {
    const inline = (spec: unknown, extra: Record<string, unknown> = {}) => register(acme, { name: 'bad', spec, ...extra });
    const withServer = { ...PETSTORE_DOCUMENT, servers: [{ url: `${store.origin}/api` }] };
    const cases: Array<[string, Promise<{ status: number; body: { error: { message: string } } }>, RegExp]> = [
      ['no document', register(acme, { name: 'bad' }), /body\.spec: give the document as spec, or where to fetch it as spec_url/],
      ['both', register(acme, { name: 'bad', spec: withServer, spec_url: `${store.origin}/openapi.json` }), /body\.spec_url: give spec or spec_url, not both/],
      ['swagger 2', inline({ swagger: '2.0', paths: {} }), /body\.spec: Swagger 2\.0 documents are not supported/],
      ['not YAML', inline('openapi: [3\n'), /body\.spec: not JSON or YAML/],
      ['relative server inline', inline(PETSTORE_DOCUMENT), /body\.spec: servers\[0\]\.url "\/api" is not an absolute URL/],
      ['remote ref', inline({ ...withServer, components: { schemas: { NewPet: { $ref: 'http://127.0.0.1:1/x.json' } } } }), /only local references/],
      ['unknown operation', inline(withServer, { operations: ['getPet', 'eatPet'] }), /body\.operations: "eatPet" not in the document/],
      ['document not found', register(acme, { name: 'bad', spec_url: `${store.origin}/missing.json` }), /body\.spec_url: fetching the document answered HTTP 404/],
      ['not http', register(acme, { name: 'bad', spec_url: 'file:///etc/passwd' }), /body\.spec_url/],
      ['bad auth', inline(withServer, { auth: { type: 'basic', user: 'u' } }), /body\.auth/],
      ['header auth with a line break', inline(withServer, { auth: { type: 'header', name: 'X-Key', value: 'a\nb' } }), /body\.auth\.value: no line breaks/],
      ['mcp prefix', register(acme, { name: 'mcpish', spec: withServer }), /body\.name: may not start with "mcp"/],
      ['built-in name', register(acme, { name: 'terminal', spec: withServer }), /body\.name: "terminal" is a built-in tool's name/],
      ['bad characters', register(acme, { name: 'pet store', spec: withServer }), /body\.name: letters, digits, dash and underscore/],
      ['too long', register(acme, { name: 'p'.repeat(33), spec: withServer }), /body\.name/],
      ['double underscore', register(acme, { name: 'pet__store', spec: withServer }), /body\.name: may not contain "__"/],
    ];
    for (const [what, pending, message] of cases) {
      const res = await pending;
      expect({ what, status: res.status }).toEqual({ what, status: 400 });
      expect({ what, message: res.body.error.message }).toEqual({ what, message: expect.stringMatching(message) });
    }
    const taken = await register(acme, { name: 'petstore', spec: withServer });
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toBe('an OpenAPI service named "petstore" already exists');
    expect((await request('GET', '/v1/openapi_services/oas_notthere12345', { key: acme.apiKey })).status).toBe(404);
    expect((await request('GET', '/v1/openapi_services/not-an-id', { key: acme.apiKey })).status).toBe(404);
  });

  it('re-seals the credential with a new key during a rotation', async () => {
    const oldKey = stack.config.RUNBOX_CREDENTIALS_KEY!;
    const newKey = randomBytes(32).toString('base64');
    const db = new PrismaService({ url: stack.db.appUrl, systemUrl: stack.db.url });
    try {
      const sealed = await queryDatabase<{ id: string; auth: string }>(stack.db.url, 'SELECT id, auth FROM openapi_services WHERE auth IS NOT NULL');
      const before = sealed.find((r) => r.id === petstoreId)!;
      const rotated = new CredentialCipher(newKey, [oldKey]);
      expect(await rotateOpenApiCredentials(db, rotated)).toEqual({ resealed: sealed.length, current: 0, skipped: 0 });
      const [after] = await queryDatabase<{ auth: string }>(stack.db.url, 'SELECT auth FROM openapi_services WHERE id = $1', [petstoreId]);
      expect(after.auth.split('.')[1]).toBe(rotated.currentKeyId);
      const aad = serviceAuthAad(acme.tenantId, petstoreId);
      expect(new CredentialCipher(newKey).open(after.auth, aad)).toBe(new CredentialCipher(oldKey).open(before.auth, aad));
      expect(await rotateOpenApiCredentials(db, rotated)).toEqual({ resealed: 0, current: sealed.length, skipped: 0 });
      // Put back what the running gateway can open.
      for (const row of sealed) await queryDatabase(stack.db.url, 'UPDATE openapi_services SET auth = $1 WHERE id = $2', [row.auth, row.id]);
    } finally {
      await db.close();
    }
  });

  it('seals the credential at rest and keeps it out of answers and logs', async () => {
    const [row] = await queryDatabase<{ auth: string; auth_type: string; document: unknown }>(stack.db.url, 'SELECT auth, auth_type, document FROM openapi_services WHERE id = $1', [petstoreId]);
    expect(row.auth_type).toBe('bearer');
    expect(row.auth).toMatch(/^v1\.[0-9a-f]{8}\./);
    expect(row.auth).not.toContain(token);
    expect(JSON.stringify(row.document)).not.toContain(token);
    await stack.stop();
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('"service":"gateway"');
    expect(log.includes(token)).toBe(false);
    expect(answers.filter((a) => a.includes(token))).toEqual([]);
  });
});
