import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { routeCatalogue } from '../apps/gateway/src/common/validation/route-catalogue';
import { fuzzCases, violation } from './support/schema-fuzz';
import { TenantCredentials, TestStack } from './support/test-stack';

const REQUESTS = 1_200;
const CONCURRENCY = 8;
const SEED = 20261130;

/** A small seeded generator, so a failure can be replayed exactly. */
class Random {
  constructor(private state: number) {}
  next(): number {
    // mulberry32
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

interface FuzzRequest {
  method: string;
  /** The route's pattern (`/v1/runs/:id`), to match a 2xx answer against ALLOWED_2XX. */
  route: string;
  /** The id put in the path: the fixture's own, or one of BAD_IDS. */
  id?: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

interface Fixtures {
  tenant: TenantCredentials;
  adminToken: string;
  session: string;
  run: string;
  memory: string;
  victimTenant: string;
  victimKey: string;
  server: string;
  mcpServer: string;
  openapiService: string;
}

type IdKind = 'session' | 'run' | 'memory' | 'tenant';

interface RouteSpec {
  method: string;
  route: string;
  auth: 'tenant' | 'admin' | 'none';
  /** Whose fixture id fills `:id` when the generator does not break it. */
  id?: IdKind;
  body?: Record<string, unknown>;
  /** Always send a query string (these routes read one, or take none at all). */
  query?: boolean;
  /** Always a bad id: a good one would delete or cancel the fixture. */
  badIdOnly?: boolean;
  mustBreakBody?: boolean;
  events?: boolean;
}

/**
 * The 2xx answers the fuzzer gets with its seed, and why each is right. The generator breaks
 * every request somewhere, but a mutation can land on a value the schema rightly accepts.
 * A 2xx counts only when its request matches an entry exactly: same method and route, the
 * right credentials, the fixture's own id, no header the generator breaks, a JSON object body
 * with only `bodyKeys` (or `null` where `nullBody` says so), a query with only `queryKeys`.
 * Any other 2xx fails the test, and so does an entry no request needed.
 */
const ALLOWED_2XX: ReadonlyArray<{ method: string; route: string; bodyKeys?: string[]; nullBody?: true; queryKeys?: string[]; reason: string }> = [
  {
    method: 'POST',
    route: '/v1/sessions',
    bodyKeys: ['metadata'],
    nullBody: true,
    reason: 'metadata is free-form JSON, so a value mutated inside it is still valid; the body is optional, and a JSON null is taken as none',
  },
  { method: 'GET', route: '/v1/runs', queryKeys: ['session_id'], reason: 'session_id only filters: one naming no session of the tenant (any 1–64 characters) lists nothing, as another tenant’s session does' },
  { method: 'PATCH', route: '/v1/admin/tenants/:id', bodyKeys: ['limits'], reason: 'a limit mutated to 0 or null is a valid limit (none allowed, or the default)' },
  { method: 'POST', route: '/v1/admin/tenants/:id/api_keys', bodyKeys: ['name'], nullBody: true, reason: 'the key name is optional, so the body is too; a JSON null is taken as none' },
];

/** The entry of ALLOWED_2XX a 2xx request matches exactly, if any. */
function allowed2xx(req: FuzzRequest, f: Fixtures) {
  const entry = ALLOWED_2XX.find((e) => e.method === req.method && e.route === req.route);
  if (!entry) return undefined;
  const right = req.route.startsWith('/v1/admin/') ? f.adminToken : f.tenant.apiKey;
  if (req.headers.authorization !== `Bearer ${right}`) return undefined;
  if (['x-padding', 'idempotency-key', 'content-encoding', 'last-event-id'].some((h) => h in req.headers)) return undefined;
  if (req.id !== undefined && ![f.session, f.run, f.memory, f.victimTenant].includes(req.id)) return undefined;
  const [, query] = req.path.split('?');
  const queryKeys = query === undefined ? [] : query.split('&').map((p) => decodeURIComponent(p.split('=')[0]));
  if (!queryKeys.every((k) => entry.queryKeys?.includes(k))) return undefined;
  if (req.body === undefined) return entry.bodyKeys ? undefined : entry;
  if (req.headers['content-type'] !== 'application/json') return undefined;
  let body: unknown;
  try {
    // A leading byte order mark is allowed by RFC 8259 and dropped by the parser.
    body = JSON.parse(String(req.body).replace(/^\ufeff/, ''));
  } catch {
    return undefined;
  }
  if (body === null && entry.nullBody) return entry;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  return Object.keys(body).every((k) => entry.bodyKeys?.includes(k)) ? entry : undefined;
}

/**
 * Routes that reach into the session's sandbox. This stack runs no executor, so a request to
 * one that passes validation is answered 503 `executor_unavailable` (with Retry-After), which
 * is the right answer there, not a crash; the schema fuzz accepts exactly that and nothing else.
 */
const SANDBOX_ROUTES = new Set(['GET /v1/sessions/:id/archive', 'POST /v1/sessions/:id/archive']);

function noExecutorAnswer(route: string, status: number, text: string): boolean {
  if (!SANDBOX_ROUTES.has(route) || status !== 503) return false;
  try {
    return (JSON.parse(text) as { error?: { code?: unknown } }).error?.code === 'executor_unavailable';
  } catch {
    return false;
  }
}

const BAD_IDS = [
  'ses_0000000000000000000000',
  'run_0000000000000000000000',
  'x'.repeat(3000),
  '..%2F..%2Fetc%2Fpasswd',
  '%00',
  '%E0%A4%A',
  '%FF',
  '%F0%9F%92%A9',
  "ses_'%20OR%20'1'%3D'1",
  'SES_ABCDEFGHIJ',
  '12345',
  'null',
  'undefined',
  '%20',
  '__proto__',
  'constructor',
  'ses_',
  'a_b',
];

/** Values that fit no field: every JSON type, boundaries, and the odd and large. */
const BAD_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  Number.MAX_SAFE_INTEGER + 2,
  '',
  ' ',
  'x'.repeat(10_000),
  '\u0000',
  '😀'.repeat(50),
  [],
  [1, 'two', null],
  {},
  { nested: { deeper: [{}] } },
  '<script>alert(1)</script>',
  "'; DROP TABLE sessions; --",
];

const RAW_BODIES = [
  '{',
  '{"input": ',
  '[1,2',
  'nul',
  '{"a":1}}',
  "{'a':1}",
  'NaN',
  '{"a":1,}',
  '\ufeff{}',
  '{"input":"a","input":5}',
  '{"__proto__":{"admin":true}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '"just a string"',
  '12345',
  'true',
  '[]',
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '\u0000\u0001\u0002',
];

const CONTENT_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/json; charset=utf-16', 'application/octet-stream'];

/** Every route, with a valid body each where it takes one, which the generator breaks. */
function routes(f: Fixtures): RouteSpec[] {
  return [
    { method: 'POST', route: '/v1/sessions', body: { metadata: { team: 'a' } }, auth: 'tenant' },
    { method: 'GET', route: '/v1/sessions/:id', id: 'session', auth: 'tenant' },
    { method: 'DELETE', route: '/v1/sessions/:id', id: 'session', auth: 'tenant', badIdOnly: true },
    { method: 'GET', route: '/v1/sessions/:id/messages', id: 'session', auth: 'tenant' },
    { method: 'GET', route: '/v1/sessions/:id/todos', id: 'session', auth: 'tenant' },
    { method: 'POST', route: '/v1/sessions/:id/tools/terminal', id: 'session', body: { arguments: { command: 'ls' } }, auth: 'tenant', mustBreakBody: true },
    { method: 'POST', route: `/v1/sessions/:id/tools/${encodeURIComponent('not a tool!')}`, id: 'session', body: { arguments: {} }, auth: 'tenant' },
    {
      method: 'POST',
      route: '/v1/runs',
      body: { input: 'hi', session_id: f.session, toolset: 'coding', approval_mode: 'auto', limits: { max_output_chars: 1000 }, permissions: { allow: ['terminal(ls)'] } },
      auth: 'tenant',
    },
    { method: 'GET', route: '/v1/runs', auth: 'tenant', query: true },
    { method: 'GET', route: '/v1/runs/:id', id: 'run', auth: 'tenant' },
    { method: 'GET', route: '/v1/runs/:id/events', id: 'run', auth: 'tenant', events: true },
    { method: 'POST', route: '/v1/runs/:id/approvals', id: 'run', body: { tool_call_id: 'call_1', decision: 'approve' }, auth: 'tenant' },
    { method: 'POST', route: '/v1/runs/:id/cancel', id: 'run', auth: 'tenant', badIdOnly: true },
    { method: 'GET', route: '/v1/memory', auth: 'tenant', query: true },
    { method: 'POST', route: '/v1/memory', body: { content: 'the deploy needs two approvals', scope: 'user:42' }, auth: 'tenant' },
    { method: 'GET', route: '/v1/memory/:id', id: 'memory', auth: 'tenant' },
    { method: 'DELETE', route: '/v1/memory/:id', id: 'memory', auth: 'tenant', badIdOnly: true },
    { method: 'GET', route: '/v1/tools', auth: 'tenant', query: true },
    { method: 'GET', route: '/v1/toolsets', auth: 'tenant', query: true },
    { method: 'POST', route: '/v1/admin/tenants', body: { name: 'fuzz', limits: { max_sessions: 5 } }, auth: 'admin' },
    { method: 'GET', route: '/v1/admin/tenants/:id', id: 'tenant', auth: 'admin' },
    { method: 'PATCH', route: '/v1/admin/tenants/:id', id: 'tenant', body: { limits: { max_sessions: 5 } }, auth: 'admin' },
    { method: 'GET', route: '/v1/admin/tenants/:id/api_keys', id: 'tenant', auth: 'admin' },
    { method: 'POST', route: '/v1/admin/tenants/:id/api_keys', id: 'tenant', body: { name: 'k' }, auth: 'admin' },
    { method: 'DELETE', route: '/v1/admin/api_keys/:id', id: 'tenant', auth: 'admin', badIdOnly: true },
    // Unauthenticated, and taking no query: always sent one, so always refused.
    { method: 'GET', route: '/healthz', auth: 'none', query: true },
    { method: 'GET', route: '/readyz', auth: 'none', query: true },
    { method: 'GET', route: '/metrics', auth: 'none', query: true },
    { method: 'PUT', route: '/v1/sessions/:id', id: 'session', body: {}, auth: 'tenant' },
    { method: 'PATCH', route: '/v1/runs', body: {}, auth: 'tenant' },
  ];
}

/** Replaces one value somewhere in `value` (a random path) with `replacement`. */
function mutate(r: Random, value: unknown, replacement: unknown): unknown {
  if (typeof value !== 'object' || value === null || r.chance(0.25)) return replacement;
  const copy: Record<string, unknown> = Array.isArray(value) ? ([...value] as unknown as Record<string, unknown>) : { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  if (keys.length === 0) return replacement;
  const key = r.pick(keys);
  copy[key] = mutate(r, copy[key], replacement);
  return copy;
}

function deepJson(depth: number): string {
  return `{"metadata":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

function generate(r: Random, f: Fixtures): FuzzRequest {
  const route = r.pick(routes(f));
  const goodIds: Record<IdKind, string> = { session: f.session, run: f.run, memory: f.memory, tenant: f.victimTenant };
  const headers: Record<string, string> = {};
  const auth = r.int(20);
  const addQuery = route.query || r.chance(0.2);
  const addBody = route.method !== 'GET' && (route.body !== undefined || r.chance(0.15)); // fetch sends no body with GET
  // Every request is wrong somewhere: when nothing else will be, its id is.
  const useBadId = route.badIdOnly || r.chance(0.5) || (auth < 16 && !addQuery && !addBody);
  const id = route.id === undefined ? undefined : useBadId ? r.pick(BAD_IDS) : goodIds[route.id];
  let path = id === undefined ? route.route : route.route.replace(':id', id);

  // Authentication: mostly right, so requests reach validation; sometimes every kind of wrong.
  const right = route.auth === 'admin' ? f.adminToken : f.tenant.apiKey;
  const wrong = route.auth === 'admin' ? f.tenant.apiKey : f.adminToken;
  if (auth < 16) headers.authorization = `Bearer ${right}`;
  else if (auth === 16) headers.authorization = `Bearer ${wrong}`;
  else if (auth === 17) headers.authorization = `Bearer ${'A'.repeat(600)}`;
  else if (auth === 18) headers.authorization = r.pick(['Basic Zm9vOmJhcg==', 'Bearer', 'bearer  ', `Token ${right}`, `Bearer ${right.slice(0, -1)}`]);

  // Query strings: junk everywhere, bad values where a query is read.
  if (addQuery) {
    const params = [
      `limit=${r.pick(['-1', '0', '201', 'banana', '1e3', '', '1&limit=2', String(Number.MAX_SAFE_INTEGER)])}`,
      `session_id=${r.pick(BAD_IDS)}`,
      `${r.pick(['x', 'a[b]', '__proto__[x]', '%E0', 'last_event_id', 'scope'])}=${r.pick(['1', 'y', '%FF', ''])}`,
    ];
    path += `?${params.filter(() => r.chance(0.6)).join('&') || 'unknown=1'}`;
  }

  if (route.events && !useBadId) {
    // The stream of a finished run ends by itself; a bad Last-Event-ID must be refused first.
    headers['last-event-id'] = r.pick(['-1', 'abc', '1.5', '99999999999999999999', '1e400', '--1']);
  }
  if (route.method === 'POST' && r.chance(0.1)) headers['idempotency-key'] = r.pick(['has space', 'x'.repeat(300), 'é', '']);
  if (r.chance(0.02)) headers['x-padding'] = 'p'.repeat(20_000); // more than Node's header limit

  let body: string | Buffer | undefined;
  let contentType = 'application/json';
  if (addBody) {
    const kind = r.int(route.mustBreakBody && !useBadId ? 5 : 10);
    const base = route.body ?? {};
    switch (kind) {
      case 0:
        body = r.pick(RAW_BODIES);
        break;
      case 1:
        body = JSON.stringify({ ...base, [r.pick(['surprise', 'tenant_id', 'id', 'x'.repeat(300)])]: r.pick(BAD_VALUES) });
        break;
      case 2:
        body = JSON.stringify(r.pick([[], 1, 'str', null, true]));
        break;
      case 3:
        body = deepJson(33 + r.int(r.chance(0.1) ? 50_000 : 200));
        break;
      case 4:
        body = JSON.stringify(mutate(r, base, r.pick(BAD_VALUES.filter((v) => typeof v !== 'string'))));
        break;
      case 5:
        body = JSON.stringify(mutate(r, base, r.pick(BAD_VALUES)));
        break;
      case 6:
        contentType = r.pick(CONTENT_TYPES);
        body = JSON.stringify(base);
        break;
      case 7:
        body = r.chance(0.3) ? JSON.stringify({ ...base, input: 'x'.repeat(2 * 1024 * 1024) }) : JSON.stringify({ ...base, note: 'y'.repeat(600_000) });
        break;
      case 8:
        headers['content-encoding'] = r.pick(['gzip', 'br', 'deflate', 'rot13']);
        body = r.chance(0.5) ? Buffer.from('not compressed at all') : gzipSync(Buffer.from('{"truncated": '));
        break;
      default:
        body = JSON.stringify(mutate(r, base, r.pick(BAD_VALUES)));
    }
    headers['content-type'] = contentType;
  }
  return { method: route.method, route: route.route, id, path, headers, body };
}

/**
 * At least a thousand generated malformed requests across every route: none may be
 * answered with a 5xx, every error is the JSON error shape, and a 2xx only where
 * ALLOWED_2XX says why the request was valid after all. The logs are captured to
 * check that none of them reached the "unhandled error" path.
 */
describe('fuzzing the HTTP API', () => {
  let stack: TestStack;
  let fixtures: Fixtures;
  const logDir = mkdtempSync(join(tmpdir(), 'runbox-fuzz-'));
  const logFile = join(logDir, 'services.log');

  beforeAll(async () => {
    // A credentials key turns saved servers on, so their routes are fuzzed too.
    stack = await new TestStack({
      executor: false,
      env: { RUNBOX_LOG_FILE: logFile, RUNBOX_LOG_LEVEL: 'info', RUNBOX_CREDENTIALS_KEY: randomBytes(32).toString('base64') },
    }).start();
    const tenant = await stack.createTenant('fuzz-tenant');
    const victim = await stack.createTenant('fuzz-victim');
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    const run = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: session.body.id, input: 'hi' } });
    await stack.waitForRun(tenant.apiKey, run.body.id);
    const memory = await stack.request('POST', '/v1/memory', { key: tenant.apiKey, body: { content: 'fuzzing leaves this fact alone' } });
    const victimKey = await stack.request('POST', `/v1/admin/tenants/${victim.tenantId}/api_keys`, { key: stack.adminToken, body: { name: 'kept' } });
    // Never connected to: saving a server does not reach it.
    const server = await stack.request('POST', '/v1/servers', {
      key: tenant.apiKey,
      body: { name: 'fuzz-server', host: 'ssh.example.com', username: 'deploy', password: 'not-a-real-one' },
    });
    expect(server.status).toBe(201);
    // Never connected to either: saving an MCP server does not reach it.
    const mcpServer = await stack.request('POST', '/v1/mcp_servers', {
      key: tenant.apiKey,
      body: { name: 'fuzz-mcp', transport: 'streamable_http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer not-a-real-one' } },
    });
    expect(mcpServer.status).toBe(201);
    // Never called: registering an inline document reaches nothing.
    const openapiService = await stack.request('POST', '/v1/openapi_services', {
      key: tenant.apiKey,
      body: { name: 'fuzz-api', spec: { openapi: '3.0.3', servers: [{ url: 'https://api.example.com' }], paths: { '/ping': { get: { operationId: 'ping' } } } } },
    });
    expect(openapiService.status).toBe(201);
    fixtures = {
      tenant,
      adminToken: stack.adminToken,
      session: session.body.id,
      run: run.body.id,
      memory: memory.body.id,
      victimTenant: victim.tenantId,
      victimKey: victimKey.body.id,
      server: server.body.id,
      mcpServer: mcpServer.body.id,
      openapiService: openapiService.body.id,
    };
  });
  afterAll(async () => {
    await stack?.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  it(`answers ${REQUESTS} malformed requests with 4xx JSON errors, a 2xx only where ALLOWED_2XX says why, never a 5xx`, async () => {
    const random = new Random(SEED);
    const requests = Array.from({ length: REQUESTS }, () => generate(random, fixtures));
    const byStatus = new Map<number, number>();
    const allowedHits = new Map(ALLOWED_2XX.map((e) => [e, 0]));
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const req = requests[next++];
        const label = `${req.method} ${req.path.slice(0, 120)} ${JSON.stringify(req.headers).slice(0, 200)} ${String(req.body ?? '').slice(0, 120)}`;
        try {
          const res = await fetch(`${stack.url}${req.path}`, { method: req.method, headers: req.headers, body: req.body, signal: AbortSignal.timeout(30_000) });
          const text = await res.text();
          byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
          const json = (res.headers.get('content-type') ?? '').includes('application/json');
          let parsed: { error?: { code?: unknown; message?: unknown } } | undefined;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          if (res.status >= 200 && res.status < 300) {
            const entry = allowed2xx(req, fixtures);
            if (!entry) failures.push(`${res.status} not on ALLOWED_2XX for ${label}: ${text.slice(0, 300)}`);
            else if (!json || parsed === undefined || parsed.error !== undefined) failures.push(`${res.status} without a JSON answer for ${label}: ${text.slice(0, 300)}`);
            else allowedHits.set(entry, (allowedHits.get(entry) ?? 0) + 1);
          } else if (res.status >= 400 && res.status < 500) {
            if (!json || typeof parsed?.error?.code !== 'string' || typeof parsed.error.message !== 'string') {
              failures.push(`${res.status} without a JSON error for ${label}: ${text.slice(0, 300)}`);
            }
          } else failures.push(`${res.status} for ${label}: ${text.slice(0, 300)}`);
        } catch (err) {
          failures.push(`no answer for ${label}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    const count = (from: number, to: number) => [...byStatus].filter(([s]) => s >= from && s < to).reduce((n, [, c]) => n + c, 0);
    const statuses = [...byStatus].sort(([x], [y]) => x - y).map(([s, c]) => `${s}×${c}`).join(' ');
    const hits = [...allowedHits].map(([e, n]) => `${e.method} ${e.route}×${n}`).join(', ');
    console.log(`fuzz: ${REQUESTS} requests sent, 2xx ${count(200, 300)}, 4xx ${count(400, 500)}, 5xx ${count(500, 600)} (${statuses}); allowed 2xx: ${hits}`);
    expect(failures.slice(0, 10)).toEqual([]);
    expect(count(500, 600)).toBe(0);
    expect(count(400, 500) + count(200, 300)).toBe(REQUESTS);
    // Every allowance is used by this seed: the list says no more than the run needs.
    expect([...allowedHits].filter(([, n]) => n === 0).map(([e]) => `${e.method} ${e.route}`)).toEqual([]);

    // Still healthy afterwards, and nothing went down the unexpected-error path.
    expect((await stack.request('GET', `/v1/sessions/${fixtures.session}`, { key: fixtures.tenant.apiKey })).status).toBe(200);
    expect((await stack.request('GET', `/v1/memory/${fixtures.memory}`, { key: fixtures.tenant.apiKey })).body.content).toBe('fuzzing leaves this fact alone');
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('"service":"gateway"');
    expect(log.split('\n').filter((line) => line.includes('unhandled error')).slice(0, 3)).toEqual([]);
  });
  /**
   * Generated from the routes' zod schemas (test/support/schema-fuzz.ts): a lone surrogate,
   * NUL, an overlong string and wrong types in every string field, key, free-form value,
   * query parameter, path parameter and header of every route, the rest of the request
   * valid. Text Postgres cannot store is refused with a 400 naming the field; nothing is a 5xx.
   */
  it('refuses unstorable text, overlong strings and wrong types in every field of every route, naming the field', async () => {
    const routes = routeCatalogue(stack.gatewayApp);
    const cases = fuzzCases(routes, {
      ids: { session: fixtures.session, run: fixtures.run, memory: fixtures.memory, tenant: fixtures.victimTenant, 'api key': fixtures.victimKey, server: fixtures.server, mcp_server: fixtures.mcpServer, 'openapi service': fixtures.openapiService },
      tenantKey: fixtures.tenant.apiKey,
      adminToken: fixtures.adminToken,
      maxStringChars: stack.config.RUNBOX_MAX_JSON_STRING_CHARS,
    });
    const perRoute = new Map<string, { cases: number; '2xx': number; '4xx': number; '5xx': number }>();
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++];
        const res = await fetch(`${stack.url}${c.path}`, { method: c.method, headers: c.headers, body: c.body, signal: AbortSignal.timeout(30_000) });
        const text = await res.text();
        const counts = perRoute.get(c.route) ?? { cases: 0, '2xx': 0, '4xx': 0, '5xx': 0 };
        counts.cases++;
        if (c.expect.kind === 'no_5xx' && noExecutorAnswer(c.route, res.status, text)) {
          perRoute.set(c.route, counts);
          continue;
        }
        if (res.status >= 500) counts['5xx']++;
        else if (res.status >= 400) counts['4xx']++;
        else counts['2xx']++;
        perRoute.set(c.route, counts);
        const wrong = violation(c, res.status, text, (res.headers.get('content-type') ?? '').includes('application/json'));
        if (wrong) failures.push(`${c.route} ${c.label}: ${wrong} ${text.slice(0, 200)}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    const total = (k: '2xx' | '4xx' | '5xx') => [...perRoute.values()].reduce((n, r) => n + r[k], 0);
    const table = [...perRoute].map(([route, r]) => `  ${route}: ${r.cases} cases, 2xx ${r['2xx']}, 4xx ${r['4xx']}, 5xx ${r['5xx']}`).join('\n');
    console.log(`schema fuzz: ${routes.length} routes, ${cases.length} cases, 2xx ${total('2xx')}, 4xx ${total('4xx')}, 5xx ${total('5xx')}\n${table}`);
    expect(failures.slice(0, 20)).toEqual([]);
    expect(total('5xx')).toBe(0);
    // The catalogue really is the API: every route this file's random fuzzer knows is in it.
    const catalogued = new Set(routes.map((r) => `${r.method} ${r.path}`));
    const known = routes.length > 0 ? ['POST /v1/runs', 'POST /v1/sessions/:id/tools/:name', 'GET /v1/memory', 'PATCH /v1/admin/tenants/:id', 'GET /metrics'] : [];
    expect(known.filter((r) => !catalogued.has(r))).toEqual([]);
    expect(routes.length).toBeGreaterThanOrEqual(25);
    // Fixtures survived: nothing destructive was accepted.
    expect((await stack.request('GET', `/v1/memory/${fixtures.memory}`, { key: fixtures.tenant.apiKey })).body.content).toBe('fuzzing leaves this fact alone');
    expect((await stack.request('GET', `/v1/sessions/${fixtures.session}`, { key: fixtures.tenant.apiKey })).status).toBe(200);
  });
});
