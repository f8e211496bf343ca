import { ScriptedModelServer } from '@app/testing';
import { callTool, runToolCalls } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * The output budget is applied once, where the result is produced: its "characters cut"
 * count is exact and the tool's own notes survive it.
 */
describe('output budget', () => {
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

  /** The shown text (header and line) and the count the cut note states. */
  const cutOf = (output: string, limit: number) => {
    const match = new RegExp(`\\n… (\\d+) characters cut \\(max_output_chars=${limit}\\)`).exec(output);
    expect(match).not.toBeNull();
    return { shown: output.slice(0, match!.index), cut: Number(match![1]), after: output.slice(match!.index + match![0].length) };
  };

  it('says exactly how much of a single 40,006-byte line read_file could not show', async () => {
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    const line = 'q'.repeat(40_006);
    await callTool(stack, tenant.apiKey, session.body.id, 'write_file', { path: 'one-line.txt', content: line });
    const read = await callTool(stack, tenant.apiKey, session.body.id, 'read_file', { path: 'one-line.txt' });
    const { shown, cut, after } = cutOf(read.output, 30_000);
    expect(shown.length).toBe(30_000);
    const header = 'one-line.txt — lines 1-1 of 1\n\n';
    expect(shown.startsWith(header)).toBe(true);
    expect(shown.length - header.length + cut).toBe(line.length);
    expect(after).toBe('');
  });

  it('keeps read_file\'s "1 more line (use offset=2 …)" note when a 5,000-character line is cut under max_output_chars 1000', async () => {
    const content = `${'w'.repeat(5_000)}\nsecond line\n`;
    const { results } = await runToolCalls(
      stack,
      model,
      tenant.apiKey,
      [
        { name: 'write_file', arguments: { path: 'long-first.txt', content } },
        { name: 'read_file', arguments: { path: 'long-first.txt' } },
      ],
      { limits: { max_output_chars: 1000 } },
    );
    const { shown, cut, after } = cutOf(results[1].output, 1000);
    expect(after).toBe('\n… 1 more line (use offset=2 to continue)');
    expect(shown.length + after.length).toBe(1000);
    const header = 'long-first.txt — lines 1-1 of 2\n\n';
    expect(shown.startsWith(header)).toBe(true);
    expect(shown.length - header.length + cut).toBe(5_000);
  });
});
