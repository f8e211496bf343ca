import { TenantCredentials, TestStack } from './support/test-stack';

/** Bad input gets a 4xx with {error: {code, message}} naming the problem, never a 500. */
describe('bad input', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;

  beforeAll(async () => {
    stack = new TestStack({ executor: false });
    await stack.start();
    tenant = await stack.createTenant();
  });
  afterAll(() => stack?.stop());

  const expectError = (res: { status: number; body: any }, status: number, code: string, message?: RegExp) => {
    expect(res.status).toBe(status);
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
