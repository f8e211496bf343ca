import { ScriptedModelServer } from '@app/testing';
import { SandboxService } from '../apps/executor/src/sandbox/sandbox.service';
import { RunsClient } from './support/runs';
import { TenantCredentials, TestStack } from './support/test-stack';

const NUL = '\u0000';
const LONE_SURROGATE = '\ud800';

/**
 * Text Postgres cannot store (NUL, lone UTF-16 surrogates): refused at the HTTP boundary
 * with a 400 naming the field; from a model or a sandbox, stored safely without failing the
 * run; and the sandbox agent answers what it cannot encode at once instead of never.
 */
describe('text Postgres cannot store', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let runs: RunsClient;
  let session: string;
  let run: string;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    tenant = await stack.createTenant();
    runs = new RunsClient(stack, tenant.apiKey);
    session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    model.enqueue({ content: 'fixture' });
    run = (await runs.start({ input: 'a fixture run', session_id: session })).id;
    await runs.wait(run);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  describe.each([
    ['NUL', NUL, /contains a NUL character \(U\+0000\)/],
    ['a lone surrogate', LONE_SURROGATE, /contains a lone surrogate \(U\+D800\)/],
  ])('%s in a request', (_name, bad, problem) => {
    const cases = (): Array<[string, string, unknown, string, boolean?]> => [
      ['POST', '/v1/runs', { input: `hi ${bad}` }, 'body.input'],
      ['POST', '/v1/runs', { input: 'hi', system: bad }, 'body.system'],
      ['POST', '/v1/runs', { input: 'hi', model: bad }, 'body.model'],
      ['POST', '/v1/runs', { input: 'hi', metadata: { team: bad } }, 'body.metadata.team'],
      ['POST', '/v1/runs', { input: 'hi', metadata: { [`k${bad}`]: 1 } }, 'body.metadata'],
      ['POST', '/v1/runs', { input: 'hi', tools: [bad] }, 'body.tools.0'],
      ['POST', '/v1/runs', { input: 'hi', permissions: { deny: [`terminal(rm ${bad})`] } }, 'body.permissions.deny.0'],
      ['POST', '/v1/sessions', { metadata: { note: bad } }, 'body.metadata.note'],
      ['POST', '/v1/memory', { content: `fact ${bad}` }, 'body.content'],
      ['POST', `/v1/runs/${run}/approvals`, { tool_call_id: 'call_1', decision: 'deny', reason: bad }, 'body.reason'],
      ['POST', `/v1/admin/tenants/${tenant.tenantId}/api_keys`, { name: `key ${bad}` }, 'body.name', true],
      ['POST', `/v1/sessions/${session}/tools/todo`, { arguments: { action: 'add', items: [`task ${bad}`] } }, 'body.arguments.items.0'],
      ['POST', `/v1/sessions/${session}/tools/memory`, { arguments: { action: 'search', query: bad } }, 'body.arguments.query'],
      ['POST', `/v1/sessions/${session}/tools/skill`, { arguments: { action: 'save', name: 'x', content: bad } }, 'body.arguments.content'],
      ['POST', `/v1/sessions/${session}/tools/session_search`, { arguments: { query: bad } }, 'body.arguments.query'],
      // Before: the sandbox agent could not encode its reply, and the call hung 65 s, then 502.
      ['POST', `/v1/sessions/${session}/tools/read_file`, { arguments: { path: bad } }, 'body.arguments.path'],
      ['POST', `/v1/sessions/${session}/tools/glob`, { arguments: { pattern: `*${bad}` } }, 'body.arguments.pattern'],
    ];

    it('is refused with a 400 naming the field, without echoing it', async () => {
      for (const [method, path, body, field, admin] of cases()) {
        const res = await stack.request(method, path, { key: admin ? stack.adminToken : tenant.apiKey, body });
        expect([method, path, field, res.status, res.body?.error?.code]).toEqual([method, path, field, 400, 'validation_failed']);
        expect(res.body.error.message).toMatch(new RegExp(`^${field.replace(/\./g, '\\.')}: `));
        expect(res.body.error.message).toMatch(problem);
        expect(res.body.error.details.issues).toEqual([{ field, message: expect.stringMatching(problem) }]);
        expect(res.text).not.toContain(bad);
      }
    });
  });

  it('refuses NUL in a query string with a 400 naming the parameter', async () => {
    for (const [path, field] of [
      ['/v1/memory?query=%00', 'query.query'],
      ['/v1/memory?query=a%00b&limit=5', 'query.query'],
      ['/v1/runs?session_id=%00', 'query.session_id'],
      [`/v1/sessions/${session}/messages?include_children=%00`, 'query.include_children'],
      ['/v1/tools?%00=1', 'query'],
    ]) {
      const res = await stack.request('GET', path, { key: tenant.apiKey });
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.error.message).toMatch(new RegExp(`^${field.replace(/\./g, '\\.')}: .*NUL`));
    }
  });

  it('stored nothing for any refused request', async () => {
    const listed = await stack.request('GET', '/v1/runs', { key: tenant.apiKey });
    expect(listed.body.data.map((r: { id: string }) => r.id)).toEqual([run]);
    expect((await stack.request('GET', '/v1/memory', { key: tenant.apiKey })).body.data).toEqual([]);
    expect((await stack.request('GET', `/v1/sessions/${session}/todos`, { key: tenant.apiKey })).body.data).toEqual([]);
  });

  it('answers a path segment that does not decode with 404 like any unknown id, without echoing it', async () => {
    for (const segment of ['%FF', '%ED%A0%80', '%E0%A4%A', 'ses_%FF%FE']) {
      for (const path of [`/v1/sessions/${segment}`, `/v1/runs/${segment}/events`, `/v1/memory/${segment}`]) {
        const res = await stack.request('GET', path, { key: tenant.apiKey });
        expect([path, res.status, res.body?.error?.code]).toEqual([path, 404, 'not_found']);
        expect(res.body.error.message).toMatch(/not found \(not a valid id\)$/);
        expect(res.text).not.toContain(segment);
      }
    }
    const known = await stack.request('GET', `/v1/sessions/${session}`, { key: tenant.apiKey });
    expect(known.status).toBe(200);
  });

  it('keeps a run going when the model writes NUL or lone surrogates: text stored as U+FFFD, such arguments refused as a tool error', async () => {
    model.enqueue(
      {
        content: `looking${NUL}`,
        toolCalls: [
          // Escapes that decode to NUL and a lone surrogate: refused, nothing runs.
          { id: 'call_nul', name: 'read_file', arguments: '{"path": "notes\\u0000.txt"}' },
          { id: 'call_sur', name: 'glob', arguments: '{"pattern": "*\\ud800"}' },
          // A raw NUL inside the argument text: not JSON, refused as such.
          { id: 'call_raw', name: 'terminal', arguments: `{"command": "echo a${NUL}"}` },
          // A program that prints NUL bytes: its output is kept, NUL as U+FFFD.
          { id: 'call_out', name: 'terminal', arguments: { command: "printf 'x\\0y'" } },
        ],
      },
      { content: `done ${LONE_SURROGATE} and ${NUL}.` },
    );
    const started = await runs.start({ input: 'try odd text', session_id: session });
    const finished = await runs.wait(started.id);
    expect(finished.status).toBe('completed');
    expect(finished.output).toBe('done \ufffd and \ufffd.');

    expect(await runs.toolResult(session, 'call_nul')).toMatch(/^refused: the arguments for read_file hold text no tool can take \(arguments\.path: contains a NUL character/);
    expect(await runs.toolResult(session, 'call_sur')).toMatch(/^refused: the arguments for glob hold text no tool can take \(arguments\.pattern: contains a lone surrogate \(U\+D800\)/);
    expect(await runs.toolResult(session, 'call_raw')).toMatch(/^refused: the arguments for terminal are not valid JSON/);
    expect(await runs.toolResult(session, 'call_out')).toContain('x\ufffdy');

    const messages = await runs.messages(session);
    const assistant = messages.find((m) => m.role === 'assistant' && m.tool_calls?.length);
    expect(assistant?.content).toBe('looking\ufffd');
    // The arguments are kept as the model wrote them (escapes and all), for the next model call.
    expect(assistant?.tool_calls?.find((c: { id: string }) => c.id === 'call_nul').function.arguments).toBe('{"path": "notes\\u0000.txt"}');
    const second = model.requests[1].body.messages.find((m) => m.role === 'assistant' && m.tool_calls);
    expect(second?.tool_calls?.map((c) => c.id)).toEqual(['call_nul', 'call_sur', 'call_raw', 'call_out']);
  });

  it('the sandbox agent answers a call whose result it cannot encode at once, with an error', async () => {
    // Past the gateway's boundary only the executor can send such text; ask it directly.
    // Before, the agent's reply failed to encode and the call waited out its time limit.
    const sandboxes = stack.executorProvider(SandboxService);
    const target = { tenantId: tenant.tenantId, sessionId: session, backend: 'docker' as const };
    const result = await sandboxes.call(target, 'read_file', { path: LONE_SURROGATE }, 20_000);
    expect(result.is_error).toBe(true);
    expect(result.metadata.error_code).toBe('unencodable_text');
    expect(result.output).toMatch(/no UTF-8 form/);
    // The channel still works.
    expect((await sandboxes.call(target, 'list_files', { path: '.' }, 20_000)).is_error).toBe(false);
  });
});
