import { queryDatabase, ScriptedModelServer } from '@app/testing';
import Docker from 'dockerode';
import { TenantCredentials, TestStack } from './support/test-stack';

type Response = Awaited<ReturnType<TestStack['request']>>;

/**
 * Tenant limits: over one, a 429 with Retry-After whose body names the limit, and nothing
 * of the request is kept. Runs wait on a scripted model that answers only when the test
 * lets it, so "running" stays running for as long as the test needs.
 */
describe('quotas', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const docker = new Docker();

  beforeAll(async () => {
    const url = await model.start();
    // Every model call waits for the end of the file, then answers; runs stay "running".
    model.enqueue(...Array.from({ length: 100 }, () => () => released.then(() => ({ content: 'done' }))));
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: url, RUNBOX_MODEL: 'scripted-1' } }).start();
  });
  afterAll(async () => {
    release();
    // Let the waiting runs finish before the stack goes away under them.
    const deadline = Date.now() + 60_000;
    while (stack && Date.now() < deadline) {
      const [{ n }] = await queryDatabase<{ n: number }>(stack.db.url, `SELECT count(*)::int AS n FROM runs WHERE status IN ('queued', 'running')`);
      if (n === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await stack?.stop();
    await model.stop();
  });

  const admin = () => ({ key: stack.adminToken });
  const count = async (sql: string, params: unknown[]) => (await queryDatabase<{ n: number }>(stack.db.url, sql, params))[0].n;
  const sessionsOf = (t: TenantCredentials) => count(`SELECT count(*)::int AS n FROM sessions WHERE tenant_id = $1`, [t.tenantId]);
  const runsOf = (t: TenantCredentials) => count(`SELECT count(*)::int AS n FROM runs WHERE tenant_id = $1`, [t.tenantId]);

  const expectOverLimit = (res: Response, limit: string, code = 'quota_exceeded') => {
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe(code);
    expect(res.body.error.message).toContain(limit);
    expect(res.body.error.details.limit).toBe(limit);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  };

  it('creates tenants with limits and changes them with PATCH', async () => {
    const created = await stack.request('POST', '/v1/admin/tenants', { ...admin(), body: { name: 'limited', limits: { max_sessions: 2, runs_per_minute: 10 } } });
    expect(created.status).toBe(201);
    // The limits it names replace the defaults; the others are the defaults.
    expect(created.body.limits).toEqual({ max_concurrent_runs: 16, max_sandboxes: 20, max_sessions: 2, runs_per_minute: 10 });
    const patched = await stack.request('PATCH', `/v1/admin/tenants/${created.body.id}`, {
      ...admin(),
      body: { limits: { max_sessions: 5, runs_per_minute: null, max_sandboxes: 1 } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.limits).toEqual({ max_concurrent_runs: 16, max_sessions: 5, max_sandboxes: 1 });
    expect((await stack.request('GET', `/v1/admin/tenants/${created.body.id}`, admin())).body.limits).toEqual({ max_concurrent_runs: 16, max_sessions: 5, max_sandboxes: 1 });

    const bad = await stack.request('PATCH', `/v1/admin/tenants/${created.body.id}`, { ...admin(), body: { limits: { max_sessions: -1, speed: 3 } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/body\.limits\.max_sessions/);
    expect(bad.body.error.message).toMatch(/speed/);
    const missing = await stack.request('PATCH', '/v1/admin/tenants/ten_0000000000000000000000', { ...admin(), body: { limits: {} } });
    expect(missing.status).toBe(404);
  });

  it('gives a tenant created without limits the default ones', async () => {
    const created = await stack.request('POST', '/v1/admin/tenants', { ...admin(), body: { name: 'defaults' } });
    expect(created.status).toBe(201);
    expect(created.body.limits).toEqual({ max_concurrent_runs: 16, max_sessions: 1000, max_sandboxes: 20, runs_per_minute: 120 });
  });

  it('refuses a session over max_sessions, and creates it once the limit is raised', async () => {
    const t = await stack.createTenant(undefined, { max_sessions: 2 });
    for (let i = 0; i < 2; i++) expect((await stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} })).status).toBe(201);
    expectOverLimit(await stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} }), 'max_sessions');
    // A run without a session would create one: refused too, and neither row is kept.
    expectOverLimit(await stack.request('POST', '/v1/runs', { key: t.apiKey, body: { input: 'hi' } }), 'max_sessions');
    expect(await sessionsOf(t)).toBe(2);
    expect(await runsOf(t)).toBe(0);

    await stack.request('PATCH', `/v1/admin/tenants/${t.tenantId}`, { ...admin(), body: { limits: { max_sessions: 3 } } });
    expect((await stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} })).status).toBe(201);
    // Deleting a session frees its slot.
    const sessions = await queryDatabase<{ id: string }>(stack.db.url, `SELECT id FROM sessions WHERE tenant_id = $1 LIMIT 1`, [t.tenantId]);
    expect((await stack.request('DELETE', `/v1/sessions/${sessions[0].id}`, { key: t.apiKey })).status).toBe(204);
    expect((await stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} })).status).toBe(201);
  });

  it('refuses a run over max_concurrent_runs without creating its session', async () => {
    const t = await stack.createTenant(undefined, { max_concurrent_runs: 1 });
    const first = await stack.request('POST', '/v1/runs', { key: t.apiKey, body: { input: 'one' } });
    expect(first.status).toBe(202);
    const second = await stack.request('POST', '/v1/runs', { key: t.apiKey, body: { input: 'two' } });
    expectOverLimit(second, 'max_concurrent_runs');
    expect(second.body.error.details).toMatchObject({ max: 1, current: 1 });
    expect(await sessionsOf(t)).toBe(1);
    expect(await runsOf(t)).toBe(1);
    // The same request repeated with its idempotency key returns the first run, not a 429.
    const keyed = { key: t.apiKey, body: { input: 'one' }, headers: { 'idempotency-key': 'k-1' } };
    await stack.request('PATCH', `/v1/admin/tenants/${t.tenantId}`, { ...admin(), body: { limits: { max_concurrent_runs: 2 } } });
    const original = await stack.request('POST', '/v1/runs', keyed);
    expect(original.status).toBe(202);
    const repeated = await stack.request('POST', '/v1/runs', keyed);
    expect(repeated.status).toBe(202);
    expect(repeated.body.id).toBe(original.body.id);
  });

  it('refuses runs over runs_per_minute with the seconds until the window frees a slot', async () => {
    const t = await stack.createTenant(undefined, { runs_per_minute: 2 });
    const session = await stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} });
    for (let i = 0; i < 2; i++) {
      // Queued behind each other: a busy session would otherwise answer 409 first.
      const body = { session_id: session.body.id, input: `run ${i}`, on_busy: 'enqueue' };
      expect((await stack.request('POST', '/v1/runs', { key: t.apiKey, body })).status).toBe(202);
    }
    const over = await stack.request('POST', '/v1/runs', { key: t.apiKey, body: { session_id: session.body.id, input: 'one too many', on_busy: 'enqueue' } });
    expectOverLimit(over, 'runs_per_minute', 'rate_limited');
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(await runsOf(t)).toBe(2);
  });

  it('gives two tenants at their limits at once exactly their share each', async () => {
    const tenants = [await stack.createTenant(undefined, { max_concurrent_runs: 3 }), await stack.createTenant(undefined, { max_concurrent_runs: 3 })];
    const sessionTenants = [await stack.createTenant(undefined, { max_sessions: 3 }), await stack.createTenant(undefined, { max_sessions: 3 })];
    // 10 parallel POSTs per tenant, all four tenants at once.
    const runs = tenants.map((t) => Array.from({ length: 10 }, (_, i) => stack.request('POST', '/v1/runs', { key: t.apiKey, body: { input: `parallel ${i}` } })));
    const sessions = sessionTenants.map((t) => Array.from({ length: 10 }, () => stack.request('POST', '/v1/sessions', { key: t.apiKey, body: {} })));
    const results = await Promise.all([...runs, ...sessions].map((batch) => Promise.all(batch)));
    for (const [i, batch] of results.entries()) {
      const statuses = batch.map((r) => r.status).sort();
      const accepted = i < 2 ? 202 : 201;
      expect(statuses).toEqual([...Array(3).fill(accepted), ...Array(7).fill(429)]);
    }
    for (const t of tenants) expect(await runsOf(t)).toBe(3);
    for (const t of tenants) expect(await sessionsOf(t)).toBe(3);
    for (const t of sessionTenants) expect(await sessionsOf(t)).toBe(3);
  });

  it('refuses a sandbox over max_sandboxes in the executor, and only for that tenant', async () => {
    const t = await stack.createTenant(undefined, { max_sandboxes: 1 });
    const other = await stack.createTenant(undefined, { max_sandboxes: 1 });
    const tool = (who: TenantCredentials, session: string) =>
      stack.request('POST', `/v1/sessions/${session}/tools/terminal`, { key: who.apiKey, body: { arguments: { command: 'echo ok' } } });
    const newSession = async (who: TenantCredentials) => (await stack.request('POST', '/v1/sessions', { key: who.apiKey, body: {} })).body.id as string;
    const [s1, s2, s3] = [await newSession(t), await newSession(t), await newSession(other)];

    expect((await tool(t, s1)).status).toBe(200);
    const refused = await tool(t, s2);
    expectOverLimit(refused, 'max_sandboxes');
    expect(await docker.listContainers({ all: true, filters: { label: [`runbox.session=${s2}`] } })).toHaveLength(0);
    // The first session keeps its sandbox; another tenant is not affected.
    expect((await tool(t, s1)).body.output).toContain('ok');
    expect((await tool(other, s3)).status).toBe(200);

    // Deleting the first session frees its slot.
    expect((await stack.request('DELETE', `/v1/sessions/${s1}`, { key: t.apiKey })).status).toBe(204);
    expect((await tool(t, s2)).status).toBe(200);
  });
});
