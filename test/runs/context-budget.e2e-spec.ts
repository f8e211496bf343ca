import { ScriptedModelServer } from '@app/testing';
import { RunsClient } from '../support/runs';
import { TestStack } from '../support/test-stack';

const BUDGET = 150_000;
const TURNS = 5;
const RESULT_CHARS = 100_000;
/** What a cut older result may add beyond the budget: its head and the note. */
const CUT_RESULT_MAX_CHARS = 2_000 + 200;
const LEFT_OUT = 'more characters of this tool result were left out';

/**
 * A run whose every turn prints a large result: what the model is sent stays within the
 * context budget (the newest results whole, older ones cut to their head with a note),
 * while the stored history keeps every result whole.
 */
describe('runs: the model context stays within its budget', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_CONTEXT_BUDGET_CHARS: String(BUDGET) },
    }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  const toolMessages = (request: (typeof model.requests)[number]) => request.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');

  it(`sends at most ${BUDGET} characters of tool results in full, and stores all of them`, async () => {
    const letters = 'ABCDE';
    for (let turn = 0; turn < TURNS; turn++) {
      const command = `head -c ${RESULT_CHARS} /dev/zero | tr '\\0' '${letters[turn]}'`;
      model.enqueue({ toolCalls: [{ id: `call_${turn}`, name: 'terminal', arguments: { command } }] });
    }
    model.enqueue({ content: 'read them all' });
    const { id, session_id } = await runs.start({ input: 'print a lot, five times', limits: { max_output_chars: 1_000_000 } });
    expect(await runs.wait(id)).toMatchObject({ status: 'completed', output: 'read them all' });

    expect(model.requests).toHaveLength(TURNS + 1);
    for (const [i, request] of model.requests.entries()) {
      const results = toolMessages(request);
      expect(results).toHaveLength(i);
      const sent = results.reduce((sum, r) => sum + r.length, 0);
      expect(sent).toBeLessThanOrEqual(BUDGET + results.length * CUT_RESULT_MAX_CHARS);
      if (i === 0) continue;
      // The newest result is always whole.
      expect(results[i - 1]).toContain(letters[i - 1].repeat(RESULT_CHARS));
      expect(results[i - 1]).not.toContain(LEFT_OUT);
    }
    // The last request: the newest result whole, the next older one cut to what was left of
    // the budget, the oldest ones cut to their head; each cut one says so.
    const last = toolMessages(model.requests[TURNS]);
    for (const older of last.slice(0, TURNS - 2)) {
      expect(older).toContain(LEFT_OUT);
      expect(older.length).toBeLessThanOrEqual(CUT_RESULT_MAX_CHARS);
    }
    expect(last[TURNS - 2]).toContain(LEFT_OUT);
    expect(last[TURNS - 2].length).toBeLessThanOrEqual(BUDGET - RESULT_CHARS + CUT_RESULT_MAX_CHARS);

    // Stored whole: the session's history has every result in full.
    const stored = (await runs.messages(session_id)).filter((m) => m.role === 'tool');
    expect(stored).toHaveLength(TURNS);
    for (const [turn, m] of stored.entries()) {
      expect(m.content).toContain(letters[turn].repeat(RESULT_CHARS));
      expect(m.content).not.toContain(LEFT_OUT);
    }
  });
});
