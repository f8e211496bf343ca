import { ScriptedModelServer } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';
import { callTool, runToolCalls } from './support/tool-runs';
import { ARTICLE_SENTENCE, PDF_SENTENCE, WebFixtureServer } from './support/web-fixture-server';

/**
 * web_fetch, web_search and the egress rules through the public API, against a server on
 * loopback that RUNBOX_ALLOW_PRIVATE_HOSTS names by its exact port. Every other private
 * address is refused before any connection (the ranges beyond loopback are covered by the
 * guard's unit tests with a stub resolver, so nothing here can leave the machine).
 */
describe('web tools', () => {
  const web = new WebFixtureServer();
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;

  const fetchUrl = (url: string, extra: Record<string, unknown> = {}) => callTool(stack, tenant.apiKey, sessionId, 'web_fetch', { url, ...extra });

  beforeAll(async () => {
    await web.start();
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${web.port}`,
        RUNBOX_WEB_SEARCH_PROVIDER: 'searxng',
        RUNBOX_WEB_SEARCH_URL: `${web.origin}/searx`,
      },
    }).start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    await web.stop();
  });

  describe('web_fetch', () => {
    it('keeps the article as Markdown and drops navigation, sidebar, footer and scripts', async () => {
      const res = await fetchUrl(`${web.origin}/article`);
      expect(res.is_error).toBe(false);
      expect(res.output).toContain('# Keeping the light');
      expect(res.output).toContain(ARTICLE_SENTENCE);
      for (const noise of ['navigation link', 'Sidebar: trending', 'Footer boilerplate', 'analytics', 'color:red']) expect(res.output).not.toContain(noise);
      expect(res.metadata).toMatchObject({ status: 200, content_type: 'text/html' });
      // Runbox names itself to the servers it fetches from.
      expect(web.requests.at(-1)).toMatchObject({ path: '/article', userAgent: expect.stringMatching(/^Runbox\/\d+\.\d+\.\d+$/) });
    });

    it('follows a redirect chain and reports it', async () => {
      const res = await fetchUrl(`${web.origin}/r1`);
      expect(res.is_error).toBe(false);
      expect(res.output).toContain(ARTICLE_SENTENCE);
      expect(res.metadata.url).toBe(`${web.origin}/article`);
      expect(res.metadata.redirects).toEqual([`${web.origin}/r1`, `${web.origin}/r2`, `${web.origin}/r3`]);
    });

    it('stops following redirects after 10', async () => {
      const before = web.requests.length;
      const res = await fetchUrl(`${web.origin}/loop`);
      expect(res).toMatchObject({ is_error: true, metadata: { error_code: 'too_many_redirects' } });
      expect(res.output).toContain('more than 10 redirects');
      expect(web.requests.length - before).toBe(11);
    });

    it('reads a PDF as text, parsed inside the sandbox from the copy saved in the workspace', async () => {
      const res = await fetchUrl(`${web.origin}/doc.pdf`);
      expect(res.is_error).toBe(false);
      expect(res.output).toContain(PDF_SENTENCE);
      expect(res.metadata.saved_to).toMatch(/^\.runbox\/web\/127\.0\.0\.1-[0-9a-f]{12}\.pdf$/);
    });

    it.each([
      ['127.0.0.1:5432', 'http://127.0.0.1:5432/'],
      ['127.0.0.2', 'http://127.0.0.2:PORT/article'],
      ['[::1]', 'http://[::1]:PORT/article'],
      ['2130706433', 'http://2130706433:5432/'],
    ])('refuses a redirect to %s that is not allowed', async (_name, target) => {
      const before = web.requests.length;
      const res = await fetchUrl(`${web.origin}/to?target=${encodeURIComponent(target.replace('PORT', String(web.port)))}`);
      expect(res.is_error).toBe(true);
      expect(res.metadata.error_code).toBe('address_not_allowed');
      expect(res.output).toMatch(/loopback address; outbound tools may only reach public addresses/);
      // Only the redirecting request reached the server; the hop was refused before connecting.
      expect(web.requests.slice(before).map((r) => r.path)).toEqual([expect.stringMatching(/^\/to\?/)]);
    });

    it('refuses a loopback port the operator did not allow, without a redirect too', async () => {
      const res = await fetchUrl('http://127.0.0.1:5432/');
      expect(res).toMatchObject({ is_error: true, metadata: { error_code: 'address_not_allowed' } });
    });

    it('reports an HTTP failure with its status and at most 2 KB of the body', async () => {
      const res = await fetchUrl(`${web.origin}/fail`);
      expect(res.is_error).toBe(true);
      expect(res.output).toMatch(/^HTTP 500 from /);
      expect(res.output).toContain('database exploded');
      expect(res.output.length).toBeLessThan(2_300);
      expect(res.metadata.status).toBe(500);
    });

    it('passes JSON through', async () => {
      const res = await fetchUrl(`${web.origin}/data.json`);
      expect(JSON.parse(res.output)).toEqual({ answer: 42, items: [1, 2] });
    });

    it('stops a slow server at the run\'s timeout for web_fetch', async () => {
      const { results } = await runToolCalls(stack, model, tenant.apiKey, [{ name: 'web_fetch', arguments: { url: `${web.origin}/slow` } }], {
        limits: { timeouts: { web_fetch: 2 } },
      });
      expect(results[0].is_error).toBe(true);
      expect(results[0].output).toMatch(/no complete answer within 2 s/);
      expect(results[0].metadata.error_code).toBe('timeout');
    });

    it('writes a 3 MB page whole into the workspace and shows its head, read back with read_file', async () => {
      const res = await fetchUrl(`${web.origin}/big`);
      expect(res.is_error).toBe(false);
      const { saved_to: path, next_offset: offset, chars } = res.metadata as { saved_to: string; next_offset: number; chars: number };
      expect(path).toMatch(/^\.runbox\/web\/127\.0\.0\.1-[0-9a-f]{12}\.md$/);
      expect(chars).toBeGreaterThan(2_500_000);
      expect(res.output.length).toBeLessThanOrEqual(30_000);
      expect(res.output).toContain(`read_file path="${path}" offset=${offset}`);
      const next = await callTool(stack, tenant.apiKey, sessionId, 'read_file', { path, offset, limit: 3 });
      expect(next.is_error).toBe(false);
      expect(next.output).toContain(`lines ${offset}-${offset + 2} of`);
      // Past read_file's 400 KB reach, grep finds the rest of the page in the same file.
      const end = await callTool(stack, tenant.apiKey, sessionId, 'grep', { pattern: '^12000', path, output_mode: 'content' });
      expect(end.is_error).toBe(false);
      // Turndown escapes a paragraph that would read as a list item: `12000\. The ...`.
      expect(end.output).toContain('12000\\. The lighthouse keeper');
    });
  });

  describe('web_search', () => {
    it('returns ranked results from SearXNG, naming the provider', async () => {
      const res = await callTool(stack, tenant.apiKey, sessionId, 'web_search', { query: 'lighthouses', max_results: 5 });
      expect(res.is_error).toBe(false);
      expect(res.output).toMatch(/^2 results from searxng for "lighthouses":/);
      expect(res.metadata.results).toEqual([
        { rank: 1, title: 'First hit', url: 'https://one.example/a', snippet: 'About lighthouses' },
        { rank: 2, title: 'Second hit', url: 'https://two.example/b', snippet: 'More' },
      ]);
      expect(web.requests.at(-1)?.path).toBe('/searx/search?q=lighthouses&format=json');
    });
  });

  describe('tenant egress rules', () => {
    it('are set by the admin API; deny wins over allow and applies to the next request', async () => {
      const other = await stack.createTenant();
      const otherSession = (await stack.request('POST', '/v1/sessions', { key: other.apiKey, body: {} })).body.id;
      const patch = (egress: unknown) => stack.request('PATCH', `/v1/admin/tenants/${other.tenantId}`, { key: stack.adminToken, body: { egress } });

      const set = await patch({ allow: ['127.0.0.1', 'example.org'], deny: ['127.0.0.1'] });
      expect(set.status).toBe(200);
      expect(set.body.egress).toEqual({ allow: ['127.0.0.1', 'example.org'], deny: ['127.0.0.1'] });
      const denied = await callTool(stack, other.apiKey, otherSession, 'web_fetch', { url: `${web.origin}/article` });
      expect(denied).toMatchObject({ is_error: true, metadata: { error_code: 'domain_denied' } });

      await patch({ allow: ['example.org'] });
      const notAllowed = await callTool(stack, other.apiKey, otherSession, 'web_fetch', { url: `${web.origin}/article` });
      expect(notAllowed).toMatchObject({ is_error: true, metadata: { error_code: 'domain_not_allowed' } });

      await patch({ allow: [], deny: [] });
      expect((await callTool(stack, other.apiKey, otherSession, 'web_fetch', { url: `${web.origin}/article` })).is_error).toBe(false);
      // The first tenant's rules were never touched.
      expect((await stack.request('GET', `/v1/admin/tenants/${tenant.tenantId}`, { key: stack.adminToken })).body.egress).toEqual({ allow: [], deny: [] });
    });

    it('refuses a malformed rule with a 400 naming it', async () => {
      const res = await stack.request('PATCH', `/v1/admin/tenants/${tenant.tenantId}`, { key: stack.adminToken, body: { egress: { deny: ['not a domain!'] } } });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/egress\.deny\.0/);
      const empty = await stack.request('PATCH', `/v1/admin/tenants/${tenant.tenantId}`, { key: stack.adminToken, body: {} });
      expect(empty.status).toBe(400);
    });
  });
});
