import {
  pinnedToolCallSubject,
  TOOL_CALL_SUBJECT,
  toolCallContract,
  ToolCallReply,
} from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { queryDatabase } from '@app/testing';
import Docker from 'dockerode';
import pino from 'pino';
import { TenantCredentials, TestStack } from './support/test-stack';

const MISSING_SESSION = 'ses_0000000000000000000000';
const MISSING_RUN = 'run_0000000000000000000000';
const MISSING_MEMORY = 'mem_0000000000000000000000';

/**
 * One tenant never sees, changes or reaches another's sessions, messages, runs, events,
 * approvals, cancellations or tools: every route that takes an id answers another tenant's
 * id exactly as it answers an id that does not exist. And the executor, asked directly over
 * NATS, refuses a session that is not the requesting tenant's.
 */
describe('tenant isolation', () => {
  let stack: TestStack;
  let a: TenantCredentials;
  let b: TenantCredentials;
  let sessionA: string;
  let runA: string;
  let memoryA: string;
  let childOfA: string;
  const docker = new Docker();

  beforeAll(async () => {
    stack = await new TestStack().start();
    [a, b] = [await stack.createTenant('iso-a'), await stack.createTenant('iso-b')];
    // A's session with a sandbox (a direct tool call) and a run (it fails at once: no model).
    sessionA = (await stack.request('POST', '/v1/sessions', { key: a.apiKey, body: { metadata: { owner: 'a' } } })).body.id;
    expect((await stack.request('POST', `/v1/sessions/${sessionA}/tools/terminal`, { key: a.apiKey, body: { arguments: { command: 'echo a-secret > a.txt' } } })).status).toBe(200);
    runA = (await stack.request('POST', '/v1/runs', { key: a.apiKey, body: { session_id: sessionA, input: 'hello' } })).body.id;
    await stack.waitForRun(a.apiKey, runA);
    const memory = await stack.request('POST', '/v1/memory', { key: a.apiKey, body: { content: 'a-secret lives in a.txt' } });
    expect(memory.status).toBe(201);
    memoryA = memory.body.id;
    // A sub-run of A's run, so that listing by parent_run_id has something to leak. Written
    // straight into the table: making one through delegate_task needs a model this stack lacks.
    childOfA = `run_${'c'.repeat(22)}`;
    await queryDatabase(
      stack.db.url,
      `INSERT INTO runs (id, tenant_id, session_id, parent_run_id, parent_call_id, depth, status, input) VALUES ($1, $2, $3, $4, 'call_sub', 1, 'failed', 'a-secret task')`,
      [childOfA, a.tenantId, sessionA, runA],
    );
  });
  afterAll(() => stack?.stop());

  /** Every route that takes an id, given that id. */
  const routes: Array<{
    name: string;
    call: (session: string, run: string, memory: string) => Promise<Awaited<ReturnType<TestStack['request']>>>;
  }> = [
    { name: 'GET session', call: (s) => stack.request('GET', `/v1/sessions/${s}`, { key: b.apiKey }) },
    { name: 'GET messages', call: (s) => stack.request('GET', `/v1/sessions/${s}/messages`, { key: b.apiKey }) },
    { name: 'POST tool', call: (s) => stack.request('POST', `/v1/sessions/${s}/tools/read_file`, { key: b.apiKey, body: { arguments: { path: 'a.txt' } } }) },
    { name: 'POST run in session', call: (s) => stack.request('POST', '/v1/runs', { key: b.apiKey, body: { session_id: s, input: 'x' } }) },
    { name: 'GET run', call: (_s, r) => stack.request('GET', `/v1/runs/${r}`, { key: b.apiKey }) },
    { name: 'GET events', call: (_s, r) => stack.request('GET', `/v1/runs/${r}/events`, { key: b.apiKey }) },
    {
      name: 'POST approval',
      call: (_s, r) => stack.request('POST', `/v1/runs/${r}/approvals`, { key: b.apiKey, body: { tool_call_id: 'call_1', decision: 'approve' } }),
    },
    { name: 'POST cancel', call: (_s, r) => stack.request('POST', `/v1/runs/${r}/cancel`, { key: b.apiKey }) },
    { name: 'GET todos', call: (s) => stack.request('GET', `/v1/sessions/${s}/todos`, { key: b.apiKey }) },
    { name: 'GET memory', call: (_s, _r, m) => stack.request('GET', `/v1/memory/${m}`, { key: b.apiKey }) },
    { name: 'DELETE memory', call: (_s, _r, m) => stack.request('DELETE', `/v1/memory/${m}`, { key: b.apiKey }) },
    { name: 'DELETE session', call: (s) => stack.request('DELETE', `/v1/sessions/${s}`, { key: b.apiKey }) },
  ];

  it.each(routes.map((r) => [r.name, r] as const))('%s: another tenant’s id is answered exactly like a missing one', async (_name, route) => {
    const foreign = await route.call(sessionA, runA, memoryA);
    const missing = await route.call(MISSING_SESSION, MISSING_RUN, MISSING_MEMORY);
    expect(foreign.status).toBe(404);
    const placeholders: Array<[string, string]> = [
      [sessionA, '<session>'],
      [MISSING_SESSION, '<session>'],
      [runA, '<run>'],
      [MISSING_RUN, '<run>'],
      [memoryA, '<memory>'],
      [MISSING_MEMORY, '<memory>'],
    ];
    const normalise = (text: string) => placeholders.reduce((out, [id, name]) => out.split(id).join(name), text);
    expect(normalise(foreign.text)).toBe(normalise(missing.text));
    expect(foreign.text).not.toContain('a-secret');
  });

  it('lists nothing of another tenant’s session', async () => {
    const foreign = await stack.request('GET', `/v1/runs?session_id=${sessionA}`, { key: b.apiKey });
    const missing = await stack.request('GET', `/v1/runs?session_id=${MISSING_SESSION}`, { key: b.apiKey });
    expect(foreign.status).toBe(200);
    expect(foreign.body).toEqual({ data: [] });
    expect(missing.body).toEqual({ data: [] });
    expect((await stack.request('GET', '/v1/runs', { key: b.apiKey })).body).toEqual({ data: [] });
  });

  it('lists no sub-run of another tenant’s run', async () => {
    const own = await stack.request('GET', `/v1/runs?parent_run_id=${runA}`, { key: a.apiKey });
    expect(own.body.data.map((r: { id: string }) => r.id)).toEqual([childOfA]);
    const foreign = await stack.request('GET', `/v1/runs?parent_run_id=${runA}`, { key: b.apiKey });
    const missing = await stack.request('GET', `/v1/runs?parent_run_id=${MISSING_RUN}`, { key: b.apiKey });
    expect(foreign.status).toBe(200);
    expect(foreign.body).toEqual({ data: [] });
    expect(missing.body).toEqual({ data: [] });
  });

  it('leaves the owner’s session, sandbox and run untouched by the other tenant', async () => {
    const session = await stack.request('GET', `/v1/sessions/${sessionA}`, { key: a.apiKey });
    expect(session.body).toMatchObject({ id: sessionA, status: 'active', metadata: { owner: 'a' }, sandbox: { state: 'ready' } });
    const file = await stack.request('POST', `/v1/sessions/${sessionA}/tools/read_file`, { key: a.apiKey, body: { arguments: { path: 'a.txt' } } });
    expect(file.body.output).toContain('a-secret');
    expect((await stack.request('GET', `/v1/runs/${runA}`, { key: a.apiKey })).body.status).toBe('failed');
    const [runsInA] = await queryDatabase<{ n: number }>(stack.db.url, 'SELECT count(*)::int AS n FROM runs WHERE session_id = $1 AND parent_run_id IS NULL', [
      sessionA,
    ]);
    expect(runsInA.n).toBe(1);
    const memory = await stack.request('GET', `/v1/memory/${memoryA}`, { key: a.apiKey });
    expect(memory.body).toMatchObject({ id: memoryA, content: 'a-secret lives in a.txt' });
  });

  it('labels every sandbox container and volume with its tenant', async () => {
    const containers = await docker.listContainers({ all: true, filters: { label: [`runbox.session=${sessionA}`] } });
    expect(containers).toHaveLength(1);
    expect(containers[0].Labels['runbox.tenant']).toBe(a.tenantId);
    const { Volumes } = await docker.listVolumes({ filters: { label: [`runbox.session=${sessionA}`] } });
    expect(Volumes.map((v) => v.Labels['runbox.tenant'])).toEqual([a.tenantId]);
  });

  describe('the executor, asked directly', () => {
    let nats: NatsClient;
    beforeAll(async () => {
      nats = await NatsClient.connect(stack.nats.url, 'isolation-test', pino({ level: 'silent' }));
    });
    afterAll(() => nats?.close());

    const call = (subject: string, tenantId: string, sessionId: string): Promise<ToolCallReply> =>
      nats.request(
        toolCallContract,
        { tenant_id: tenantId, session_id: sessionId, call_id: `iso-${Date.now()}`, tool: 'read_file', arguments: { path: 'a.txt' }, max_output_chars: 1000, timeout_ms: 10_000 },
        { timeoutMs: 30_000, subject },
      );

    it('refuses a tool call whose session belongs to another tenant, on either subject', async () => {
      for (const subject of [pinnedToolCallSubject(stack.executorId), TOOL_CALL_SUBJECT]) {
        const reply = await call(subject, b.tenantId, sessionA);
        expect(reply.ok).toBe(false);
        if (!reply.ok) expect(reply.error.code).toBe('not_found');
      }
      // The owner's call on the same subject works, so the refusal is about the tenant.
      const own = await call(pinnedToolCallSubject(stack.executorId), a.tenantId, sessionA);
      expect(own.ok && own.result.output).toContain('a-secret');
    });

    it('refuses, and creates no container, for a session that is not yet open in the executor', async () => {
      const fresh = (await stack.request('POST', '/v1/sessions', { key: a.apiKey, body: {} })).body.id;
      const reply = await call(TOOL_CALL_SUBJECT, b.tenantId, fresh);
      expect(reply).toMatchObject({ ok: false, error: { code: 'not_found' } });
      expect(await docker.listContainers({ all: true, filters: { label: [`runbox.session=${fresh}`] } })).toHaveLength(0);
      const [sandboxRows] = await queryDatabase<{ n: number }>(stack.db.url, 'SELECT count(*)::int AS n FROM sandboxes WHERE session_id = $1', [fresh]);
      expect(sandboxRows.n).toBe(0);
    });
  });
});
