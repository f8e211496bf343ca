import { ScriptedModelServer } from '@app/testing';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { buildApiDocument } from '../apps/gateway/src/api-docs/api-document';
import { routeCatalogue } from '../apps/gateway/src/common/validation/route-catalogue';
import { findChromium } from '../apps/gateway/src/web/browser/chromium-path';
import { readRunEvents } from './support/sse';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * GET /openapi.json and GET /docs: the document is valid OpenAPI 3.1, names exactly the
 * routes the app serves, and describes what they really answer; the reference page renders
 * it in a browser under its Content-Security-Policy.
 */
describe('API document and reference page', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let doc: any;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const DOC_ID = 'https://runbox.invalid/openapi.json';

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = new TestStack({ executor: false, env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } });
    await stack.start();
    tenant = await stack.createTenant();
    // A route without @ApiOperation makes this a 500; the first test names the route.
    doc = (await stack.request('GET', '/openapi.json')).body;
    ajv.addSchema({ ...doc, $id: DOC_ID });
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  /** Checks a body against what the document says the route answers with that status. */
  const expectDocumented = (method: string, path: string, res: { status: number; body: unknown }, contentType = 'application/json', within: string[] = []) => {
    const pointer = ['paths', path, method, 'responses', String(res.status), 'content', contentType, 'schema', ...within]
      .map((p) => encodeURIComponent(p.replace(/~/g, '~0').replace(/\//g, '~1')))
      .join('/');
    const validate = ajv.getSchema(`${DOC_ID}#/${pointer}`);
    if (!validate) throw new Error(`the document has no ${contentType} answer ${res.status} for ${method.toUpperCase()} ${path}`);
    if (!validate(res.body)) throw new Error(`${method.toUpperCase()} ${path} answered ${res.status} outside its documented shape: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(res.body)}`);
  };

  it('has an @ApiOperation for every route (a failure lists the routes without one)', () => {
    expect(() => buildApiDocument(routeCatalogue(stack.gatewayApp))).not.toThrow();
    expect(doc.openapi).toBe('3.1.0');
  });

  it('is a valid OpenAPI 3.1 document (checked by @seriousme/openapi-schema-validator)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = JSON.parse(await validateWithSeriousme(doc));
    expect(result).toEqual({ valid: true, version: '3.1', errors: null });
  });

  it('documents every route the app serves, and serves every route it documents', () => {
    const served = expressRoutes(stack.gatewayApp.getHttpAdapter().getInstance());
    const documented = new Set<string>();
    for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
      for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${path}`);
    }
    const missing = [...served].filter((r) => !documented.has(r)).sort();
    const extra = [...documented].filter((r) => !served.has(r)).sort();
    expect({ 'served but not documented': missing, 'documented but not served': extra }).toEqual({ 'served but not documented': [], 'documented but not served': [] });
    expect(served.size).toBeGreaterThan(40);
  });

  it('lists the error codes and auth of each route', () => {
    const create = doc.paths['/v1/runs'].post;
    expect(create.security).toEqual([{ apiKey: [] }]);
    expect(create.responses['202']).toBeDefined();
    expect(create.responses['409'].content['application/json'].schema.properties.error.properties.code.enum).toEqual(['conflict']);
    expect(create.responses['429'].content['application/json'].schema.properties.error.properties.code.enum).toEqual(['quota_exceeded', 'rate_limited']);
    expect(create.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }));
    expect(doc.paths['/v1/admin/tenants'].post.security).toEqual([{ adminToken: [] }]);
    expect(doc.paths['/v1/admin/tenants'].post.responses['403'].description).toBe('forbidden');
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/v1/sessions/{id}'].get.responses['404'].description).toBe('not_found');
    // Requests by their input shape: `limit` has a default, so a client may leave it out.
    expect(doc.paths['/v1/runs'].get.parameters).toContainEqual(expect.objectContaining({ name: 'limit', in: 'query', required: false }));
  });

  it('describes what the routes really answer, errors included', async () => {
    const k = { key: tenant.apiKey };
    const session = await stack.request('POST', '/v1/sessions', { ...k, body: { metadata: { team: 'docs' } } });
    expectDocumented('post', '/v1/sessions', session);
    expectDocumented('get', '/v1/sessions/{id}', await stack.request('GET', `/v1/sessions/${session.body.id}`, k));
    expectDocumented('get', '/v1/sessions/{id}/todos', await stack.request('GET', `/v1/sessions/${session.body.id}/todos`, k));
    expectDocumented('get', '/v1/tools', await stack.request('GET', '/v1/tools', k));
    expectDocumented('get', '/v1/toolsets', await stack.request('GET', '/v1/toolsets', k));
    const memory = await stack.request('POST', '/v1/memory', { ...k, body: { content: 'the docs live at /docs' } });
    expectDocumented('post', '/v1/memory', memory);
    expectDocumented('post', '/v1/memory', await stack.request('POST', '/v1/memory', { ...k, body: { content: 'the docs live at /docs' } }));
    expectDocumented('get', '/v1/memory', await stack.request('GET', '/v1/memory?query=docs', k));
    expectDocumented('get', '/v1/admin/tenants/{id}', await stack.request('GET', `/v1/admin/tenants/${tenant.tenantId}`, { key: stack.adminToken }));
    expectDocumented('get', '/v1/admin/tenants/{id}/api_keys', await stack.request('GET', `/v1/admin/tenants/${tenant.tenantId}/api_keys`, { key: stack.adminToken }));
    expectDocumented('get', '/healthz', await stack.request('GET', '/healthz'));

    expectDocumented('get', '/v1/sessions/{id}', await stack.request('GET', '/v1/sessions/ses_doesnotexist1', k));
    expectDocumented('get', '/v1/runs', await stack.request('GET', '/v1/runs?limit=banana', k));
    expectDocumented('post', '/v1/runs', await stack.request('POST', '/v1/runs', { key: 'rbx_nope', body: { input: 'x' } }));
    expectDocumented('post', '/v1/runs', await stack.request('POST', '/v1/runs', { ...k, raw: '{"input": ' }));
    // A body outside the document's shape fails the check: it is not a formality.
    expect(() => expectDocumented('get', '/healthz', { status: 200, body: { status: 'fine' } })).toThrow(/outside its documented shape/);
  });

  it("describes a run's answers and every event its stream sends", async () => {
    model.enqueue({ toolCalls: [{ id: 'call_1', name: 'todo', arguments: { action: 'add', items: [{ content: 'write the docs' }] } }] }, { content: 'Noted.' });
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'Plan the docs', tools: ['todo'] } });
    expectDocumented('post', '/v1/runs', created);
    const events = await readRunEvents(stack.url, tenant.apiKey, created.body.id);
    expect(events.map((e) => e.event)).toEqual(expect.arrayContaining(['run.queued', 'run.started', 'tool_call.started', 'tool_call.completed', 'run.completed']));
    const frames: Array<{ title: string }> = doc.paths['/v1/runs/{id}/events'].get.responses['200'].content['text/event-stream'].schema.oneOf;
    for (const event of events) {
      const frame = frames.findIndex((f) => f.title === event.event);
      expect({ type: event.event, documented: frame >= 0 }).toEqual({ type: event.event, documented: true });
      expectDocumented('get', '/v1/runs/{id}/events', { status: 200, body: { id: event.id, event: event.event, data: event.data } }, 'text/event-stream', ['oneOf', String(frame)]);
    }
    expectDocumented('get', '/v1/runs/{id}', await stack.request('GET', `/v1/runs/${created.body.id}`, { key: tenant.apiKey }));
    expectDocumented('get', '/v1/runs', await stack.request('GET', '/v1/runs', { key: tenant.apiKey }));
    expectDocumented('get', '/v1/sessions/{id}/messages', await stack.request('GET', `/v1/sessions/${created.body.session_id}/messages`, { key: tenant.apiKey }));
    expectDocumented('post', '/v1/runs/{id}/cancel', await stack.request('POST', `/v1/runs/${created.body.id}/cancel`, { key: tenant.apiKey }));
  });

  it('serves the reference page with a policy that allows only its own files', async () => {
    const page = await fetch(`${stack.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    const html = await page.text();
    expect(html).not.toMatch(/<script>|<script [^>]*>[^<]|\son\w+=|https?:\/\/(?!.*runbox)/i);
    const script = await fetch(`${stack.url}/docs/reference.js`);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(script.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('renders every operation in a browser, without a console error or a blocked request', async () => {
    const executablePath = findChromium(undefined);
    if (!executablePath) throw new Error('no Chromium found (scripts/infra.sh test-tools installs it)');
    const browser = await chromium.launch({ executablePath, headless: true, chromiumSandbox: false, args: ['--disable-gpu', '--disable-background-networking'] });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      page.on('requestfailed', (r) => problems.push(`failed: ${r.url()}`));
      const elsewhere: string[] = [];
      page.on('request', (r) => !r.url().startsWith(stack.url) && !r.url().startsWith('data:') && elsewhere.push(r.url()));
      await page.goto(`${stack.url}/docs`);
      const operations = Object.values<Record<string, unknown>>(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
      await page.waitForFunction(`document.querySelectorAll('details.operation').length === ${operations}`, undefined, { timeout: 30_000 });
      await page.click('details#runs_create > summary');
      const body = await page.locator('details#runs_create').textContent();
      expect(body).toContain('POST');
      expect(body).toContain('/v1/runs');
      expect(body).toContain('Idempotency-Key');
      expect(body).toContain('input');
      expect(body).toContain('quota_exceeded, rate_limited');
      expect(await page.locator('details#runs_stream').textContent()).toContain('tool_call.approval_required');
      expect(await page.locator('nav a').allTextContents()).toEqual(expect.arrayContaining(['runs', 'sessions', 'admin', 'operations']));
      expect({ problems, elsewhere }).toEqual({ problems: [], elsewhere: [] });
    } finally {
      await browser.close();
    }
  });
});

/** The validator is an ES module; it runs in its own Node process, given the document on stdin. */
function validateWithSeriousme(doc: unknown): Promise<string> {
  const program = `
    import { Validator } from '@seriousme/openapi-schema-validator';
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(input));
    process.stdout.write(JSON.stringify({ valid: result.valid, version: validator.version, errors: result.errors ?? null }));
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', program], { cwd: join(__dirname, '..'), stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`the validator exited with ${code}: ${err}`));
    });
    child.stdin.end(JSON.stringify(doc));
  });
}

/**
 * The routes Express itself holds after app.init(), as `METHOD /openapi/{path}`: read from
 * the router, not from the Nest metadata the document is built from.
 */
function expressRoutes(app: any): Set<string> {
  const routes = new Set<string>();
  for (const layer of app.router.stack) {
    if (!layer.route) continue;
    const path = String(layer.route.path).replace(/[{}]/g, '').replace(/[:*]([A-Za-z0-9_]+)/g, '{$1}');
    for (const [method, on] of Object.entries(layer.route.methods)) if (on && method !== '_all') routes.add(`${method.toUpperCase()} ${path}`);
  }
  return routes;
}
