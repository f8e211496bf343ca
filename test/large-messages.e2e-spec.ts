import { ScriptedModelServer } from '@app/testing';
import { createHash } from 'node:crypto';
import { callTool, runToolCalls } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * Tool results and arguments larger than one NATS message (max_payload, 1 MiB on a default
 * server): a result over it spills to a workspace file, arguments over it travel in
 * pieces, and the executor keeps serving either way.
 */
describe('messages larger than NATS max_payload', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  /** A Python one-liner's stdout in the session's sandbox. */
  const python = async (sessionId: string, code: string): Promise<string> => {
    const result = await callTool(stack, tenant.apiKey, sessionId, 'terminal', { command: `python3 -c ${JSON.stringify(code)}` });
    expect(result.is_error).toBe(false);
    return result.output.split('stdout:\n')[1].trim();
  };

  it('spills a 2.2 MB terminal result to a workspace file instead of killing the executor', async () => {
    const { sessionId, results } = await runToolCalls(
      stack,
      model,
      tenant.apiKey,
      [{ name: 'terminal', arguments: { command: `python3 -c "print('é' * 1100000)"` } }],
      { limits: { max_output_chars: 1_000_000 } },
    );
    const [result] = results;
    expect(result.is_error).toBe(false);
    const spilledTo: string = result.metadata.output_spilled_to;
    expect(spilledTo).toMatch(/^\.runbox\/outputs\/.+\.txt$/);
    expect(result.output).toMatch(new RegExp(`over the \\d+-byte limit for one result: above is its start; all of it is in ${spilledTo.replace(/\./g, '\\.')}`));
    // What the model sees fits one message, and starts with what was printed.
    expect(Buffer.byteLength(result.output)).toBeLessThan(1024 * 1024);
    expect(result.output).toContain('é'.repeat(1000));
    // The file holds the whole result (the terminal's own cut at 1,000,000 characters), and
    // what the model saw is its start.
    const head = Buffer.from(result.output.slice(0, result.output.lastIndexOf('\n… the output is')));
    const sha = createHash('sha256').update(head).digest('hex');
    const check = `import hashlib; b = open('${spilledTo}', 'rb').read(); t = b.decode(); print(t.count('é') > 999000, 'characters cut (max_output_chars=1000000)' in t, hashlib.sha256(b[:${head.length}]).hexdigest())`;
    expect(await python(sessionId, check)).toBe(`True True ${sha}`);
  });

  it('writes 524,200 é (1,048,447 bytes of request) through a direct write_file call, byte for byte', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    const content = 'é'.repeat(524_200);
    const res = await stack.request('POST', `/v1/sessions/${session.body.id}/tools/write_file`, {
      key: tenant.apiKey,
      body: { arguments: { path: 'big.txt', content } },
    });
    expect(res.status).toBe(200);
    expect(res.body.is_error).toBe(false);
    expect(res.body.metadata.bytes_written).toBe(1_048_400);
    const sha = createHash('sha256').update(content).digest('hex');
    expect(await python(session.body.id, `import hashlib; print(hashlib.sha256(open('big.txt','rb').read()).hexdigest())`)).toBe(sha);
  });

  it('writes a 4 MB file a model asked for, whole (its arguments travel in pieces)', async () => {
    const content = Array.from({ length: 120_000 }, (_, i) => `line ${i} — ünïcödé ${'x'.repeat(i % 17)}`).join('\n');
    expect(Buffer.byteLength(content)).toBeGreaterThan(4 * 1024 * 1024);
    const { sessionId, results } = await runToolCalls(stack, model, tenant.apiKey, [{ name: 'write_file', arguments: { path: 'data/large.txt', content } }]);
    expect(results[0].is_error).toBe(false);
    expect(results[0].metadata.bytes_written).toBe(Buffer.byteLength(content));
    const sha = createHash('sha256').update(content).digest('hex');
    expect(await python(sessionId, `import hashlib; print(hashlib.sha256(open('data/large.txt','rb').read()).hexdigest())`)).toBe(sha);
  });
});
