import { ScriptedModelServer } from '@app/testing';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutorHttpServer } from '../apps/executor/src/observability/executor-http.server';
import { parsePrometheusText, Sample, sampleValue } from './support/prometheus-text';
import { TenantCredentials, TestStack } from './support/test-stack';

interface LogLine {
  service: string;
  msg: string;
  request_id?: string;
  callId?: string;
  tool?: string;
  outcome?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * What an operator sees: the gateway's /metrics moving with a run, the executor's own
 * probe and metrics endpoints, and a request's correlation id reaching the executor's log
 * line for its tool call. Both services log (info) to one file, as an operator would ship them.
 */
describe('observability', () => {
  const model = new ScriptedModelServer();
  const logDir = mkdtempSync(join(tmpdir(), 'runbox-observe-'));
  const logFile = join(logDir, 'runbox.log');
  let stack: TestStack;
  let first: TenantCredentials;
  let executorUrl = '';

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_LOG_LEVEL: 'info',
        RUNBOX_LOG_FILE: logFile,
        // One tenant with a label of its own; every later one is `other`.
        RUNBOX_METRICS_TENANT_LABELS: '1',
      },
    }).start();
    first = await stack.createTenant();
    executorUrl = `http://127.0.0.1:${stack.executorProvider(ExecutorHttpServer).boundPort}`;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  beforeEach(() => model.reset());

  async function gatewayMetrics(): Promise<Sample[]> {
    const res = await fetch(`${stack.url}/metrics`);
    expect(res.status).toBe(200);
    return parsePrometheusText(await res.text());
  }

  async function executorMetrics(): Promise<Sample[]> {
    const res = await fetch(`${executorUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    return parsePrometheusText(await res.text());
  }

  function logLines(): LogLine[] {
    return readFileSync(logFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LogLine);
  }

  /** Starts a run whose model calls `terminal` once (after `before` steps), then answers. */
  async function runWithTerminal(key: string, headers: Record<string, string> = {}, before: Parameters<ScriptedModelServer['enqueue']> = []) {
    model.enqueue(...before, { toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'echo observed' } }] }, { content: 'done' });
    const created = await stack.request('POST', '/v1/runs', { key, body: { input: 'run a command' }, headers });
    expect(created.status).toBe(202);
    const run = await stack.waitForRun(key, created.body.id);
    expect(run.status).toBe('completed');
    return { created, run };
  }

  it('counts runs, queue wait, run duration, tool calls and model calls (errors too) as a run goes', async () => {
    const before = await gatewayMetrics();
    // The provider fails once (HTTP 500, retryable); the run tries again and goes on.
    await runWithTerminal(first.apiKey, {}, [{ status: 500 }]);
    const after = await gatewayMetrics();
    const moved = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);

    expect(moved('runbox_runs_created_total', { tenant: first.tenantId })).toBe(1);
    expect(moved('runbox_runs_ended_total', { status: 'completed', tenant: first.tenantId })).toBe(1);
    expect(moved('runbox_run_duration_seconds_count', { status: 'completed' })).toBe(1);
    expect(moved('runbox_run_queue_wait_seconds_count')).toBe(1);
    expect(moved('runbox_tool_calls_total', { tool: 'terminal', status: 'completed' })).toBe(1);
    expect(moved('runbox_tenant_tool_calls_total', { tenant: first.tenantId })).toBe(1);
    expect(moved('runbox_tool_call_duration_seconds_count', { tool: 'terminal', outcome: 'ok' })).toBe(1);
    expect(moved('runbox_tool_call_duration_seconds_sum', { tool: 'terminal', outcome: 'ok' })).toBeGreaterThan(0);
    const modelCalls = { provider: 'openai', model: 'scripted-1' };
    expect(moved('runbox_model_call_duration_seconds_count', { ...modelCalls, outcome: 'ok' })).toBe(2);
    expect(moved('runbox_model_call_duration_seconds_count', { ...modelCalls, outcome: 'error' })).toBe(1);
    expect(moved('runbox_model_call_errors_total', { ...modelCalls, retryable: 'true' })).toBe(1);
  });

  it('shows the active runs by status, read from Postgres, and counts a cancelled one when it ends', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'echo waiting' } }] });
    const created = await stack.request('POST', '/v1/runs', { key: first.apiKey, body: { input: 'ask first', approval_mode: 'prompt' } });
    expect(created.status).toBe(202);
    await stack.waitForRun(first.apiKey, created.body.id, ['requires_approval']);
    const waiting = await gatewayMetrics();
    expect(sampleValue(waiting, 'runbox_runs_active', { status: 'requires_approval' })).toBe(1);
    expect(sampleValue(waiting, 'runbox_runs_active', { status: 'running' })).toBe(0);

    const cancelled = await stack.request('POST', `/v1/runs/${created.body.id}/cancel`, { key: first.apiKey, body: {} });
    expect(cancelled.status).toBe(200);
    const after = await gatewayMetrics();
    expect(sampleValue(after, 'runbox_runs_active', { status: 'requires_approval' })).toBe(0);
    expect(sampleValue(after, 'runbox_runs_ended_total', { status: 'cancelled', tenant: first.tenantId }) - sampleValue(waiting, 'runbox_runs_ended_total', { status: 'cancelled', tenant: first.tenantId })).toBe(1);
    expect(sampleValue(after, 'runbox_run_duration_seconds_count', { status: 'cancelled' }) - sampleValue(waiting, 'runbox_run_duration_seconds_count', { status: 'cancelled' })).toBe(1);
  });

  it('counts tenants past the label limit as other, never under their own id', async () => {
    const later = await stack.createTenant();
    const before = await gatewayMetrics();
    model.enqueue({ content: 'hello' });
    const created = await stack.request('POST', '/v1/runs', { key: later.apiKey, body: { input: 'hi' } });
    expect((await stack.waitForRun(later.apiKey, created.body.id)).status).toBe('completed');
    const after = await gatewayMetrics();
    expect(sampleValue(after, 'runbox_runs_created_total', { tenant: 'other' }) - sampleValue(before, 'runbox_runs_created_total', { tenant: 'other' })).toBe(1);
    expect(after.filter((s) => s.labels.tenant === later.tenantId)).toEqual([]);
    const tenantLabels = new Set(after.filter((s) => s.labels.tenant !== undefined).map((s) => s.labels.tenant));
    expect([...tenantLabels].sort()).toEqual([first.tenantId, 'other'].sort());
  });

  it("carries the request's X-Request-Id through the run into the executor's log line for its tool call", async () => {
    const requestId = `req-${randomBytes(8).toString('hex')}`;
    const { created, run } = await runWithTerminal(first.apiKey, { 'X-Request-Id': requestId });
    expect(created.headers.get('x-request-id')).toBe(requestId);

    const executorLines = logLines().filter((l) => l.service === 'executor' && l.msg === 'tool call' && l.callId === `${run.id}:call_1`);
    expect(executorLines).toHaveLength(1);
    expect(executorLines[0]).toMatchObject({ tool: 'terminal', outcome: 'ok', request_id: requestId });
    // The gateway's own lines for the run carry it too.
    expect(logLines().some((l) => l.service === 'gateway' && l.msg === 'run completed' && l.request_id === requestId)).toBe(true);
  });

  it('carries it on a direct tool call, and answers it on every response', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: first.apiKey, body: {} });
    expect(session.status).toBe(201);
    const requestId = `direct-${randomBytes(8).toString('hex')}`;
    const call = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, {
      key: first.apiKey,
      body: { arguments: { command: 'echo direct' } },
      headers: { 'X-Request-Id': requestId },
    });
    expect(call.status).toBe(200);
    expect(call.headers.get('x-request-id')).toBe(requestId);
    const lines = logLines().filter((l) => l.service === 'executor' && l.msg === 'tool call' && l.request_id === requestId);
    expect(lines).toHaveLength(1);
    // An error answer carries it as well.
    const missing = await stack.request('GET', '/v1/runs/run_missing', { key: first.apiKey, headers: { 'X-Request-Id': requestId } });
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(missing.headers.get('x-request-id')).toBe(requestId);
  });

  it('makes an id for a request without one, and replaces one that is too long or holds characters it does not take', async () => {
    const none = await stack.request('GET', '/healthz');
    expect(none.headers.get('x-request-id')).toMatch(UUID);
    for (const bad of ['x'.repeat(129), 'has spaces', 'quote"d', '<script>']) {
      const res = await stack.request('GET', '/healthz', { headers: { 'X-Request-Id': bad } });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toMatch(UUID);
    }
    expect(logLines().some((l) => JSON.stringify(l).includes('has spaces') || JSON.stringify(l).includes('<script>'))).toBe(false);
  });

  it('serves the executor healthz, readyz and metrics on its own port, with the live sandbox, pool, channel and Docker API figures', async () => {
    const health = await fetch(`${executorUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${executorUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { subscriptions: 'ok', nats: 'ok', docker: 'ok' } });

    // A session with a sandbox, up and idle once its call returned.
    const session = await stack.request('POST', '/v1/sessions', { key: first.apiKey, body: {} });
    const call = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: first.apiKey, body: { arguments: { command: 'true' } } });
    expect(call.status).toBe(200);
    const samples = await executorMetrics();
    const executor = { executor: stack.executorId };
    expect(sampleValue(samples, 'runbox_executor_sandboxes', { ...executor, state: 'idle' })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(samples, 'runbox_executor_sandboxes', { ...executor, state: 'busy' })).toBe(0);
    expect(sampleValue(samples, 'runbox_executor_warm_pool_target', executor)).toBe(0);
    expect(sampleValue(samples, 'runbox_executor_channel_errors_total', { ...executor, kind: 'protocol_violation' })).toBe(0);
    expect(sampleValue(samples, 'runbox_executor_docker_api_duration_seconds_count', { ...executor, operation: 'POST /containers/create', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    // Ids never become labels: every operation is a method and a path pattern.
    const operations = new Set(samples.filter((s) => s.labels.operation !== undefined).map((s) => s.labels.operation));
    for (const op of operations) expect(op).toMatch(/^[A-Z]+ \/[a-z_]*(\/(:id|[a-z]+))*(\/(:part|[a-z]+))?$/);

    expect((await fetch(`${executorUrl}/nothing-here`)).status).toBe(404);
    expect((await fetch(`${executorUrl}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});
