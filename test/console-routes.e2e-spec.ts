import { BUILTIN_SKILLS } from '../apps/gateway/src/skills/builtin-skills';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * The routes the console reads besides the existing ones: the admin's tenant list and the
 * skill library over HTTP, and /console itself with its security headers.
 */
describe('console routes', () => {
  let stack: TestStack;
  let a: TenantCredentials;
  let b: TenantCredentials;
  let sessionA: string;

  const writeSkill = async (t: TenantCredentials, session: string, name: string, content: string) => {
    const res = await stack.request('POST', `/v1/sessions/${session}/tools/skill`, { key: t.apiKey, body: { arguments: { action: 'write', name, content } } });
    expect(res.status).toBe(200);
    expect(res.body.is_error).toBe(false);
  };

  beforeAll(async () => {
    // The skill tool runs in the gateway: no executor needed.
    stack = await new TestStack({ executor: false }).start();
    a = await stack.createTenant('console-a');
    b = await stack.createTenant('console-b');
    sessionA = (await stack.request('POST', '/v1/sessions', { key: a.apiKey, body: {} })).body.id;
    await writeSkill(a, sessionA, 'deploy-checklist', 'description: How to ship a release safely\n\nTag, build, roll out 10% first.');
    await writeSkill(a, sessionA, 'pct_literal', 'description: Matches 100% only\n\nA skill whose text has a literal 100%.');
  });

  afterAll(async () => {
    await stack?.stop();
  });

  describe('GET /v1/admin/tenants', () => {
    it('lists every tenant, newest first, for the admin token only', async () => {
      const res = await stack.request('GET', '/v1/admin/tenants', { key: stack.adminToken });
      expect(res.status).toBe(200);
      const names = res.body.data.map((t: { name: string }) => t.name);
      expect(names.indexOf('console-b')).toBeLessThan(names.indexOf('console-a'));
      expect(res.body.data.find((t: { id: string }) => t.id === a.tenantId)).toMatchObject({ name: 'console-a', limits: expect.any(Object) });
      expect((await stack.request('GET', '/v1/admin/tenants', { key: a.apiKey })).status).toBe(401);
      expect((await stack.request('GET', '/v1/admin/tenants')).status).toBe(401);
    });

    it('honours limit and names a bad one', async () => {
      const one = await stack.request('GET', '/v1/admin/tenants?limit=1', { key: stack.adminToken });
      expect(one.body.data).toHaveLength(1);
      const bad = await stack.request('GET', '/v1/admin/tenants?limit=0', { key: stack.adminToken });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toMatch(/limit/);
    });
  });

  describe('/v1/skills', () => {
    it('lists the built-ins and the tenant’s own, and another tenant sees only the built-ins', async () => {
      const mine = await stack.request('GET', '/v1/skills', { key: a.apiKey });
      expect(mine.status).toBe(200);
      const own = mine.body.data.filter((s: { builtin: boolean }) => !s.builtin);
      expect(own.map((s: { name: string }) => s.name)).toEqual(['deploy-checklist', 'pct_literal']);
      expect(own[0]).toMatchObject({ description: 'How to ship a release safely', updated_at: expect.any(String) });
      expect(mine.body.data.filter((s: { builtin: boolean }) => s.builtin)).toHaveLength(BUILTIN_SKILLS.length);

      const theirs = await stack.request('GET', '/v1/skills', { key: b.apiKey });
      expect(theirs.body.data.every((s: { builtin: boolean }) => s.builtin)).toBe(true);
      expect((await stack.request('GET', '/v1/skills/deploy-checklist', { key: b.apiKey })).status).toBe(404);
    });

    it('searches names, descriptions and text, case-insensitively and literally', async () => {
      const hit = await stack.request('GET', '/v1/skills?query=ROLL%20OUT', { key: a.apiKey });
      expect(hit.body.data.map((s: { name: string }) => s.name)).toEqual(['deploy-checklist']);
      // % is a character to find, not a wildcard.
      const pct = await stack.request('GET', `/v1/skills?query=${encodeURIComponent('100%')}`, { key: a.apiKey });
      expect(pct.body.data.map((s: { name: string }) => s.name)).toEqual(['pct_literal']);
      const underscore = await stack.request('GET', '/v1/skills?query=pct_l', { key: a.apiKey });
      expect(underscore.body.data.map((s: { name: string }) => s.name)).toEqual(['pct_literal']);
      const none = await stack.request('GET', '/v1/skills?query=deploy', { key: b.apiKey });
      expect(none.body.data.filter((s: { builtin: boolean }) => !s.builtin)).toEqual([]);
    });

    it('reads one skill with its text', async () => {
      const res = await stack.request('GET', '/v1/skills/deploy-checklist', { key: a.apiKey });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ name: 'deploy-checklist', builtin: false });
      expect(res.body.content).toContain('roll out 10% first');
      const builtin = await stack.request('GET', `/v1/skills/${BUILTIN_SKILLS[0].name}`, { key: a.apiKey });
      expect(builtin.body).toMatchObject({ builtin: true, content: BUILTIN_SKILLS[0].content });
    });

    it('deletes the tenant’s own skill only: not another tenant’s, not a built-in', async () => {
      expect((await stack.request('DELETE', '/v1/skills/deploy-checklist', { key: b.apiKey })).status).toBe(404);
      expect((await stack.request('GET', '/v1/skills/deploy-checklist', { key: a.apiKey })).status).toBe(200);
      const builtin = await stack.request('DELETE', `/v1/skills/${BUILTIN_SKILLS[0].name}`, { key: a.apiKey });
      expect(builtin.status).toBe(409);
      expect(builtin.body.error.code).toBe('conflict');
      expect((await stack.request('DELETE', '/v1/skills/deploy-checklist', { key: a.apiKey })).status).toBe(204);
      expect((await stack.request('GET', '/v1/skills/deploy-checklist', { key: a.apiKey })).status).toBe(404);
      expect((await stack.request('DELETE', '/v1/skills/deploy-checklist', { key: a.apiKey })).status).toBe(404);
    });

    it('answers 400 naming the problem for a bad name or query, 401 without a key', async () => {
      const badName = await stack.request('DELETE', '/v1/skills/Not%20A%20Name', { key: a.apiKey });
      expect(badName.status).toBe(400);
      expect(badName.body.error.message).toMatch(/lowercase letters, digits/);
      const badQuery = await stack.request('GET', `/v1/skills?query=${'x'.repeat(201)}`, { key: a.apiKey });
      expect(badQuery.status).toBe(400);
      expect(badQuery.body.error.message).toMatch(/query/);
      expect((await stack.request('GET', '/v1/skills?color=red', { key: a.apiKey })).status).toBe(400);
      expect((await stack.request('GET', '/v1/skills')).status).toBe(401);
    });
  });

  describe('/console', () => {
    it('serves the page with a policy that forbids inline script and framing', async () => {
      const res = await fetch(`${stack.url}/console`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toMatch(/script-src 'self'(;|$)/);
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toContain('unsafe-eval');
      expect(csp).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const html = await res.text();
      // Every script is a file of the same origin: none inline.
      expect(html).toMatch(/<script src="\/console\/app\.js"/);
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    });

    it('serves the bundle and nothing else from that path', async () => {
      const js = await fetch(`${stack.url}/console/app.js`);
      expect(js.status).toBe(200);
      expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
      expect((await js.text()).length).toBeGreaterThan(10_000);
      for (const path of ['/console/app.js.map', '/console/..%2Fpackage.json', '/console/%2e%2e%2fpackage.json']) {
        const res = await fetch(`${stack.url}${path}`);
        expect(res.status).toBe(404);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
      }
    });
  });
});
