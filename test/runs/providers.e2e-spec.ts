import { ScriptedModelServer } from '@app/testing';
import { RunsClient } from '../support/runs';
import { readRunEvents } from '../support/sse';
import { TestStack } from '../support/test-stack';

/** The two provider wire formats the loop speaks, each against a scripted server of that format. */
describe('runs: model providers', () => {
  describe('Anthropic Messages', () => {
    const model = new ScriptedModelServer({ format: 'anthropic' });
    let stack: TestStack;
    let runs: RunsClient;

    beforeAll(async () => {
      const modelUrl = await model.start();
      stack = await new TestStack({
        env: { RUNBOX_MODEL_PROVIDER: 'anthropic', RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'claude-scripted', RUNBOX_MODEL_API_KEY: 'sk-ant-test', RUNBOX_MODEL_MAX_TOKENS: '1234' },
      }).start();
      runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
    });

    afterAll(async () => {
      await stack?.stop();
      await model.stop();
    });

    it('runs tools and answers, speaking the Messages format both ways', async () => {
      model.enqueue(
        {
          content: 'Let me look.',
          toolCalls: [
            { id: 'call_1', name: 'terminal', arguments: { command: 'echo from-anthropic' } },
            { id: 'call_2', name: 'list_files', arguments: {} },
          ],
        },
        { content: 'It said from-anthropic.' },
      );
      const { id, session_id } = await runs.start({ input: 'say something', system: 'Be brief. {{tools}}', toolset: 'coding' });
      const run = await runs.wait(id);
      expect(run).toMatchObject({ status: 'completed', output: 'It said from-anthropic.' });
      expect(run.usage).toMatchObject({ input_tokens: 24, output_tokens: 14, tool_calls: 2, model_calls: 2 });

      const [first, second] = model.requests as any[];
      expect(first.path).toBe('/v1/messages');
      expect(first.headers['x-api-key']).toBe('sk-ant-test');
      expect(first.headers['anthropic-version']).toBe('2023-06-01');
      expect(first.body).toMatchObject({ model: 'claude-scripted', max_tokens: 1234 });
      expect(first.body.system).toMatch(/^Be brief\. - /);
      expect(first.body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'say something' }] }]);
      const terminal = first.body.tools.find((t: { name: string }) => t.name === 'terminal');
      expect(terminal.input_schema).toMatchObject({ type: 'object', required: ['command'] });

      // The second request carries the tool_use blocks and both results in one user turn.
      expect(second.body.messages).toHaveLength(3);
      expect(second.body.messages[1]).toEqual({
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'toolu_1', name: 'terminal', input: { command: 'echo from-anthropic' } },
          { type: 'tool_use', id: 'toolu_2', name: 'list_files', input: {} },
        ],
      });
      const results = second.body.messages[2];
      expect(results.role).toBe('user');
      expect(results.content.map((b: { type: string; tool_use_id: string }) => [b.type, b.tool_use_id]).sort()).toEqual([
        ['tool_result', 'toolu_1'],
        ['tool_result', 'toolu_2'],
      ]);
      expect(results.content.find((b: { tool_use_id: string }) => b.tool_use_id === 'toolu_1').content).toContain('from-anthropic');
      expect(await runs.toolResult(session_id, 'toolu_1')).toContain('from-anthropic');
    });

    it('retries an overloaded provider (529) and then fails with its message', async () => {
      const overloaded = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}';
      model.reset();
      model.enqueue({ status: 529, body: overloaded }, { status: 529, body: overloaded }, { status: 529, body: overloaded });
      const { id } = await runs.start({ input: 'x' });
      const run = await runs.wait(id);
      expect(run.status).toBe('failed');
      expect(run.error).toMatch(/HTTP 529.*Overloaded/);
      expect(model.requests).toHaveLength(3);
    });
  });

  describe('OpenAI-compatible, streamed', () => {
    const model = new ScriptedModelServer();
    let stack: TestStack;
    let runs: RunsClient;

    beforeAll(async () => {
      const modelUrl = await model.start();
      stack = await new TestStack({ executor: false, env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_MODEL_STREAM: '1' } }).start();
      runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
    });

    afterAll(async () => {
      await stack?.stop();
      await model.stop();
    });

    it('streams the answer as message.delta events, assembles streamed tool calls, and counts usage', async () => {
      const answer = 'A streamed answer, in several pieces.';
      model.enqueue({ toolCalls: [{ id: 'call_s', name: 'launch_rockets', arguments: { count: 3 } }] }, { content: answer });
      const { id, session_id } = await runs.start({ input: 'stream please', model: 'per-run-model' });
      const events = await readRunEvents(stack.url, runs.key, id);
      expect(events[events.length - 1].event).toBe('run.completed');

      expect(model.requests[0].body).toMatchObject({ stream: true, model: 'per-run-model' });
      // The tool call arrived in pieces and was put back together (and refused: not a tool).
      const assistant = events.find((e) => e.event === 'message.created' && e.data.role === 'assistant')!;
      expect(assistant.data.tool_calls).toEqual([{ id: 'call_s', name: 'launch_rockets', arguments: '{"count":3}' }]);
      expect(await runs.toolResult(session_id, 'call_s')).toMatch(/^refused: tool launch_rockets is not available/);

      const deltas = events.filter((e) => e.event === 'message.delta');
      expect(deltas.length).toBeGreaterThan(0);
      expect(deltas.map((d) => d.data.text).join('')).toBe(answer);
      const final = events.filter((e) => e.event === 'message.created').pop()!;
      expect(final.data.content).toBe(answer);
      expect(Math.max(...deltas.map((d) => d.id))).toBeLessThan(final.id);
      expect((await runs.get(id)).body.usage).toMatchObject({ input_tokens: 20, output_tokens: 10 });
    });
  });
});
