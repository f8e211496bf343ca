import { ScriptedModelServer } from '@app/testing';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * API keys, the admin token and the model key never appear in a log line or an error body,
 * even when a client or a provider puts them where they would be echoed. The services log
 * at trace level to a file the test reads back.
 */
describe('secrets', () => {
  const model = new ScriptedModelServer();
  const modelKey = `sk-live-${randomBytes(16).toString('hex')}`;
  const logDir = mkdtempSync(join(tmpdir(), 'runbox-secrets-'));
  const logFile = join(logDir, 'services.log');
  let stack: TestStack;
  let tenant: TenantCredentials;
  let revokedKey = '';
  const bodies: string[] = [];

  beforeAll(async () => {
    const url = await model.start();
    stack = await new TestStack({
      env: { RUNBOX_MODEL_BASE_URL: url, RUNBOX_MODEL: 'scripted-1', RUNBOX_MODEL_API_KEY: modelKey, RUNBOX_LOG_FILE: logFile, RUNBOX_LOG_LEVEL: 'trace' },
    }).start();
    tenant = await stack.createTenant('secrets');
  });
  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  const record = async (...args: Parameters<TestStack['request']>) => {
    const res = await stack.request(...args);
    bodies.push(res.text);
    return res;
  };

  it('keeps them out of error bodies wherever a client puts them', async () => {
    const key = tenant.apiKey;
    // Issuing is the one answer that carries a key, once, by design: not recorded.
    const issued = await stack.request('POST', `/v1/admin/tenants/${tenant.tenantId}/api_keys`, { key: stack.adminToken, body: { name: 'to revoke' } });
    revokedKey = issued.body.key;
    await record('DELETE', `/v1/admin/api_keys/${issued.body.id}`, { key: stack.adminToken });

    const answers = [
      await record('GET', '/v1/tools', { key: revokedKey }),
      await record('GET', '/v1/tools', { key: stack.adminToken }),
      await record('POST', '/v1/admin/tenants', { key, body: { name: 'x' } }),
      await record('GET', `/v1/sessions/${encodeURIComponent(key)}`, { key }),
      await record('GET', `/v1/runs/${encodeURIComponent(stack.adminToken)}`, { key }),
      await record('GET', `/v1/tools?api_key=${encodeURIComponent(key)}`, { key }),
      await record('POST', '/v1/sessions', { key, body: { [key]: stack.adminToken } }),
      await record('POST', '/v1/sessions', { key, body: { metadata: { [modelKey]: 1 }, api_key: key } }),
      await record('POST', '/v1/runs', { key, body: { input: 'x', model: key, approval_mode: stack.adminToken } }),
      await record('POST', '/v1/runs', { key, raw: `{"input": "${key}", ` }),
      await record('POST', '/v1/runs', { key, body: { input: 'x' }, headers: { 'idempotency-key': `${key} ${modelKey}` } }),
    ];
    for (const res of answers) expect(res.status).toBeGreaterThanOrEqual(400);
    // The one with the key as an unknown field did name the field, without its value.
    expect(answers[6].body.error.message).toMatch(/rbx_[0-9a-z]{10}_\[redacted\]/);
  });

  it('keeps the model key out of a run that failed because the provider echoed it', async () => {
    model.enqueue({ status: 401, body: JSON.stringify({ error: { message: `Incorrect API key provided: ${modelKey}. You can find your key at ...` } }) });
    const created = await record('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'hello' } });
    const run = await stack.waitForRun(tenant.apiKey, created.body.id);
    bodies.push(JSON.stringify(run));
    expect(run.status).toBe('failed');
    expect(run.error).toContain('Incorrect API key provided: [redacted]');
    const events = await record('GET', `/v1/runs/${created.body.id}/events`, { key: tenant.apiKey });
    expect(events.text).toContain('run.failed');
    // The provider did get the key: the redaction is on the way back only.
    expect(model.requests[0].headers.authorization).toBe(`Bearer ${modelKey}`);
  });

  it('never writes them to the logs', async () => {
    // A sandbox tool call and a session deletion add the executor's lines too.
    const session = await record('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    await record('POST', `/v1/sessions/${session.body.id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command: 'echo hi' } } });
    await record('DELETE', `/v1/sessions/${session.body.id}`, { key: tenant.apiKey });
    await stack.stop();

    const log = readFileSync(logFile, 'utf8');
    const lines = log.split('\n').filter(Boolean);
    // The capture works: both services wrote, including the failed run with its cause.
    expect(lines.length).toBeGreaterThan(20);
    expect(log).toContain('"service":"gateway"');
    expect(log).toContain('"service":"executor"');
    expect(log).toContain('Incorrect API key provided: [redacted]');

    const secrets = {
      'api key': tenant.apiKey,
      'api key secret part': tenant.apiKey.slice(15),
      'revoked api key': revokedKey.slice(15),
      'admin token': stack.adminToken,
      'model key': modelKey,
    };
    for (const [what, value] of Object.entries(secrets)) {
      expect({ what, inLogs: lines.filter((l) => l.includes(value)).length }).toEqual({ what, inLogs: 0 });
      expect({ what, inBodies: bodies.filter((b) => b.includes(value)).length }).toEqual({ what, inBodies: 0 });
    }
  });
});
