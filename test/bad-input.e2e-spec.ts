import { TenantCredentials, TestStack } from './support/test-stack';

/** Bad input gets a 4xx with {error: {code, message}} naming the problem, never a 500. */
describe('bad input', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;

  beforeAll(async () => {
    // A string limit below the 16,384 characters session metadata may hold as JSON, so a body
    // only the raw-byte check refuses can be sent in that free-form field.
    stack = new TestStack({ executor: false, env: { RUNBOX_MAX_JSON_STRING_CHARS: '8192' } });
    await stack.start();
    tenant = await stack.createTenant();
  });
  afterAll(() => stack?.stop());

  const expectError = (res: { status: number; headers: Headers; body: any }, status: number, code: string, message?: RegExp) => {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.error.code).toBe(code);
    expect(typeof res.body.error.message).toBe('string');
    if (message) expect(res.body.error.message).toMatch(message);
    expect(JSON.stringify(res.body)).not.toMatch(/at .*\.(ts|js):\d+/);
  };

  it('rejects missing, unknown, revoked and malformed keys with the same 401', async () => {
    const responses = [
      await stack.request('GET', '/v1/tools'),
      await stack.request('GET', '/v1/tools', { key: 'rbx_aaaaaaaaaa_' + 'a'.repeat(43) }),
      await stack.request('GET', '/v1/tools', { key: 'not-a-key' }),
      await stack.request('GET', '/v1/tools', { headers: { authorization: 'Basic Zm9vOmJhcg==' } }),
    ];
    const issued = await stack.request('POST', `/v1/admin/tenants/${tenant.tenantId}/api_keys`, { key: stack.adminToken, body: { name: 'temp' } });
    expect((await stack.request('GET', '/v1/tools', { key: issued.body.key })).status).toBe(200);
    expect((await stack.request('DELETE', `/v1/admin/api_keys/${issued.body.id}`, { key: stack.adminToken })).status).toBe(204);
    responses.push(await stack.request('GET', '/v1/tools', { key: issued.body.key }));
    for (const res of responses) expectError(res, 401, 'unauthorized');
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
  });

  it('protects admin routes with the admin token', async () => {
    expectError(await stack.request('POST', '/v1/admin/tenants', { body: { name: 'x' } }), 401, 'unauthorized');
    expectError(await stack.request('POST', '/v1/admin/tenants', { key: tenant.apiKey, body: { name: 'x' } }), 401, 'unauthorized');
  });

  it('names the missing or mistyped field', async () => {
    const k = { key: tenant.apiKey };
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: {} }), 400, 'validation_failed', /body\.input/);
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: { input: 42 } }), 400, 'validation_failed', /body\.input/);
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: { input: 'x', approval_mode: 'yolo' } }), 400, 'validation_failed', /approval_mode/);
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: { input: 'x', surprise: true } }), 400, 'validation_failed', /surprise/);
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: [] }), 400, 'validation_failed');
    expectError(await stack.request('POST', '/v1/sessions', { ...k, body: { metadata: 'nope' } }), 400, 'validation_failed', /metadata/);
    expectError(await stack.request('POST', '/v1/admin/tenants', { key: stack.adminToken, body: { name: '' } }), 400, 'validation_failed', /name/);
    expectError(await stack.request('GET', '/v1/runs?limit=banana', k), 400, 'validation_failed', /limit/);
  });

  it('answers invalid JSON with 400 and an oversized body with 413', async () => {
    expectError(await stack.request('POST', '/v1/runs', { key: tenant.apiKey, raw: '{"input": ' }), 400, 'invalid_json');
    const huge = JSON.stringify({ input: 'x'.repeat(2 * 1024 * 1024) });
    expectError(await stack.request('POST', '/v1/runs', { key: tenant.apiKey, raw: huge }), 413, 'payload_too_large');
  });

  describe('JSON depth and string limits, checked on the raw body', () => {
    /** `levels` arrays nested in each other around a string. */
    const nested = (levels: number): unknown => {
      let value: unknown = 'leaf';
      for (let i = 0; i < levels; i++) value = [value];
      return value;
    };
    // {"metadata":{"deep":[[…]]}}: the body and metadata objects are two levels, the arrays the rest.
    const sessionBody = (depth: number, extra: Record<string, unknown> = {}) => ({ metadata: { deep: nested(depth - 2), ...extra } });

    it('refuses a body nested one level deeper than RUNBOX_MAX_JSON_DEPTH, even in free-form metadata', async () => {
      const maxDepth = stack.config.RUNBOX_MAX_JSON_DEPTH;
      const res = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: sessionBody(maxDepth + 1) });
      expectError(res, 400, 'validation_failed', new RegExp(`deeper than ${maxDepth} levels \\(max_json_depth\\)`));
      expect(res.body.error.details).toEqual({ limit: 'max_json_depth', max: maxDepth });
    });

    it('refuses a string one character longer than RUNBOX_MAX_JSON_STRING_CHARS in a body under the size limit', async () => {
      const maxChars = stack.config.RUNBOX_MAX_JSON_STRING_CHARS;
      const body = JSON.stringify({ metadata: { note: 'é'.repeat(maxChars + 1) } });
      expect(Buffer.byteLength(body)).toBeLessThan(stack.config.RUNBOX_MAX_BODY_BYTES);
      const res = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, raw: body });
      expectError(res, 400, 'validation_failed', new RegExp(`longer than ${maxChars} characters \\(max_json_string_chars\\)`));
      expect(res.body.error.details).toEqual({ limit: 'max_json_string_chars', max: maxChars });
    });

    it('accepts a body exactly at both limits and stores it as sent', async () => {
      const metadata = sessionBody(stack.config.RUNBOX_MAX_JSON_DEPTH, { note: 'é'.repeat(stack.config.RUNBOX_MAX_JSON_STRING_CHARS) }).metadata;
      const created = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: { metadata } });
      expect(created.status).toBe(201);
      expect((await stack.request('GET', `/v1/sessions/${created.body.id}`, { key: tenant.apiKey })).body.metadata).toEqual(metadata);
    });
  });

  describe('unknown query parameters and bodies where none belong', () => {
    let session: string;
    let run: string;
    let memory: string;

    beforeAll(async () => {
      const k = { key: tenant.apiKey };
      session = (await stack.request('POST', '/v1/sessions', { ...k, body: {} })).body.id;
      run = (await stack.request('POST', '/v1/runs', { ...k, body: { session_id: session, input: 'hi' } })).body.id;
      await stack.waitForRun(tenant.apiKey, run);
      memory = (await stack.request('POST', '/v1/memory', { ...k, body: { content: 'kept despite bad requests' } })).body.id;
    });

    it('refuses an unknown query parameter on every route with a 400 naming it', async () => {
      const k = { key: tenant.apiKey };
      const admin = { key: stack.adminToken };
      const refused: Array<[string, string, Parameters<TestStack['request']>[2]]> = [
        ['POST', '/v1/runs', { ...k, body: { session_id: session, input: 'hi' } }],
        ['GET', `/v1/runs/${run}`, k],
        ['POST', `/v1/runs/${run}/cancel`, k],
        ['POST', `/v1/runs/${run}/approvals`, { ...k, body: { tool_call_id: 'call_1', decision: 'approve' } }],
        ['GET', `/v1/runs/${run}/events`, k],
        ['GET', '/v1/memory', k],
        ['POST', '/v1/memory', { ...k, body: { content: 'never stored' } }],
        ['GET', `/v1/memory/${memory}`, k],
        ['DELETE', `/v1/memory/${memory}`, k],
        ['GET', `/v1/sessions/${session}/todos`, k],
        ['GET', `/v1/sessions/${session}`, k],
        ['GET', '/v1/tools', k],
        ['GET', `/v1/admin/tenants/${tenant.tenantId}`, admin],
        ['GET', '/healthz', {}],
        ['GET', '/readyz', {}],
        ['GET', '/metrics', {}],
      ];
      for (const [method, path, options] of refused) {
        const res = await stack.request(method, `${path}?bogus_param=1`, options);
        expect([method, path, res.status]).toEqual([method, path, 400]);
        expectError(res, 400, 'validation_failed', /query: Unrecognized key: "bogus_param"/);
      }
      // Nothing was done on the way: the memory is still there, and no fact or run was added.
      expect((await stack.request('GET', `/v1/memory/${memory}`, k)).status).toBe(200);
      expect((await stack.request('GET', '/v1/memory', k)).body.data.map((m: { id: string }) => m.id)).toEqual([memory]);
      expect((await stack.request('GET', `/v1/runs?session_id=${session}`, k)).body.data.map((r: { id: string }) => r.id)).toEqual([run]);
    });

    it('answers a request without valid credentials with the 401, whatever its query holds', async () => {
      expectError(await stack.request('GET', '/v1/tools?bogus_param=1'), 401, 'unauthorized');
      expectError(await stack.request('GET', '/v1/tools?bogus_param=1', { key: 'rbx_not_a_key' }), 401, 'unauthorized');
      expectError(await stack.request('GET', `/v1/admin/tenants/${tenant.tenantId}?bogus_param=1`, { key: tenant.apiKey }), 401, 'unauthorized');
      // The same requests with valid credentials are refused for the query.
      expectError(await stack.request('GET', '/v1/tools?bogus_param=1', { key: tenant.apiKey }), 400, 'validation_failed', /"bogus_param"/);
    });

    it('takes only last_event_id in the query of the event stream', async () => {
      const k = { key: tenant.apiKey };
      expectError(await stack.request('GET', `/v1/runs/${run}/events?last_event_id=0&x=1`, k), 400, 'validation_failed', /"x"/);
      expectError(await stack.request('GET', `/v1/runs/${run}/events?last_event_id=abc`, k), 400, 'validation_failed', /query\.last_event_id/);
      const stream = await stack.request('GET', `/v1/runs/${run}/events?last_event_id=0`, k);
      expect(stream.status).toBe(200);
      expect(stream.text).toMatch(/event: run\.(completed|failed)/);
    });

    it('cancels only with an empty body or {}: a field is a 400 naming it', async () => {
      const k = { key: tenant.apiKey };
      expectError(await stack.request('POST', `/v1/runs/${run}/cancel`, { ...k, body: { force: true } }), 400, 'validation_failed', /body: Unrecognized key: "force"/);
      expectError(await stack.request('POST', `/v1/runs/${run}/cancel`, { ...k, body: [] }), 400, 'validation_failed', /body/);
      expectError(await stack.request('POST', `/v1/runs/${run}/cancel`, { ...k, raw: 'null' }), 400, 'validation_failed', /body/);
      // The run has ended: past validation, the cancel itself is refused as a conflict.
      expectError(await stack.request('POST', `/v1/runs/${run}/cancel`, k), 409, 'conflict', /already ended/);
      expectError(await stack.request('POST', `/v1/runs/${run}/cancel`, { ...k, body: {} }), 409, 'conflict', /already ended/);
    });
  });

  it('answers unknown ids and routes with 404', async () => {
    const k = { key: tenant.apiKey };
    expectError(await stack.request('GET', '/v1/sessions/ses_0000000000000000000000', k), 404, 'not_found');
    expectError(await stack.request('GET', '/v1/sessions/..%2F..%2Fetc', k), 404, 'not_found');
    expectError(await stack.request('GET', '/v1/runs/run_0000000000000000000000', k), 404, 'not_found');
    expectError(await stack.request('POST', '/v1/runs', { ...k, body: { input: 'x', session_id: 'ses_0000000000000000000000' } }), 404, 'not_found');
    expectError(await stack.request('GET', '/v1/nothing-here', k), 404, 'not_found');
    expectError(await stack.request('POST', '/v1/admin/tenants/ten_0000000000000000000000/api_keys', { key: stack.adminToken, body: {} }), 404, 'not_found');
  });

  it('refuses a duplicate tenant name with 409 and creates nothing', async () => {
    const name = `dup-${Date.now()}`;
    expect((await stack.request('POST', '/v1/admin/tenants', { key: stack.adminToken, body: { name } })).status).toBe(201);
    expectError(await stack.request('POST', '/v1/admin/tenants', { key: stack.adminToken, body: { name } }), 409, 'conflict');
  });

  it('answers 503 with a readable error when no executor is running', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    const res = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'true' } } });
    expectError(res, 503, 'executor_unavailable', /no executor/);
    const ready = await stack.request('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.checks.executor).toBe('down');
  });

  it('exposes Prometheus metrics labelled by route pattern, not by raw path', async () => {
    await stack.request('GET', '/v1/sessions/ses_0000000000000000000001', { key: tenant.apiKey });
    const res = await fetch(`${stack.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/runbox_http_requests_total\{method="GET",route="\/v1\/sessions\/:id",status="404"\} [1-9]/);
    expect(text).not.toContain('ses_0000000000000000000001');
    expect(text).toContain('runbox_gateway_process_cpu_seconds_total');
  });
});
