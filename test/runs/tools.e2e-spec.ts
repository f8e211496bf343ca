import { expectedToolset, ScriptedModelServer } from '@app/testing';
import { RunsClient } from '../support/runs';
import { readRunEvents } from '../support/sse';
import { TestStack } from '../support/test-stack';

/**
 * What the model is offered (toolsets, enabled/disabled, the pattern allowlist), what
 * happens to a call of anything else, and the loop guardrails: warn, hard stop, repetition.
 */
describe('runs: tool selection and guardrails', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;
  let catalogue: Array<{ name: string; toolsets: string[] }>;

  beforeAll(async () => {
    const modelUrl = await model.start();
    // A credentials key makes vps_run available, so every registered tool is.
    const credentialsKey = Buffer.alloc(32, 7).toString('base64');
    // Every tool available: saved servers need a credentials key, web_search a provider (one
    // that is never asked here).
    stack = await new TestStack({
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_CREDENTIALS_KEY: credentialsKey,
        RUNBOX_WEB_SEARCH_PROVIDER: 'searxng',
        RUNBOX_WEB_SEARCH_URL: 'http://127.0.0.1:9/search',
      },
    }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
    catalogue = (await stack.request('GET', '/v1/tools', { key: runs.key })).body.data;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  /** Runs once with `options` and returns the tool names the model was offered. */
  async function offerFor(options: Record<string, unknown>): Promise<string[]> {
    model.enqueue({ content: 'ok' });
    const { id } = await runs.start({ input: 'what can you use?', ...options });
    expect((await runs.wait(id)).status).toBe('completed');
    return ScriptedModelServer.offeredTools(model.requests[model.requests.length - 1]);
  }

  /** TOOLS.md's table (not the registry's own idea of it), over the tools this gateway has. */
  function expectedOffer(toolset: string): string[] {
    return expectedToolset(toolset, catalogue.map((t) => t.name));
  }

  it('registers every tool Runbox ships, so the toolsets below are checked whole', () => {
    expect(catalogue.map((t) => t.name).sort()).toEqual(
      ['browser', 'delegate_task', 'edit_file', 'glob', 'grep', 'list_files', 'memory', 'rag_index', 'rag_search', 'read_file', 'session_search', 'skill', 'terminal', 'todo', 'vps_download', 'vps_run', 'vps_upload', 'web_fetch', 'web_search', 'write_file'],
    );
  });

  it.each(['minimal', 'coding', 'research', 'browser', 'default', 'all'])('offers exactly the %s toolset', async (toolset) => {
    const offered = await offerFor({ toolset });
    expect(offered).toEqual(expectedOffer(toolset));
    const listed = (await stack.request('GET', '/v1/toolsets', { key: runs.key })).body.data.find((s: { name: string }) => s.name === toolset);
    expect(listed.tools).toEqual(offered);
  });

  it('offers the default toolset when none is named', async () => {
    expect(await offerFor({})).toEqual(expectedOffer('default'));
  });

  it('adds enabled and removes disabled names, disabled winning, unknown names ignored', async () => {
    const offered = await offerFor({ toolset: 'minimal', enabled: ['terminal', 'glob', 'no_such_tool'], disabled: ['grep', 'terminal'] });
    const expected = [...expectedOffer('minimal'), 'glob'].filter((n) => n !== 'grep').sort();
    expect(offered).toEqual(expected);
    expect(offered).not.toContain('terminal');
    expect(offered).not.toContain('no_such_tool');
  });

  it('tools patterns choose from every registered tool: *, exact names, !exclusions that win, unknown names ignored', async () => {
    const all = catalogue.map((t) => t.name).sort();
    expect(await offerFor({ tools: ['*'] })).toEqual(all);
    expect(await offerFor({ toolset: 'coding', tools: ['*', '!terminal'] })).toEqual(all.filter((n) => n !== 'terminal'));
    expect(await offerFor({ toolset: 'coding', tools: ['!terminal', '*'] })).toEqual(all.filter((n) => n !== 'terminal'));
    expect(await offerFor({ toolset: 'coding', tools: ['read_file', 'grep', 'local_shell'] })).toEqual(['grep', 'read_file']);
    expect(await offerFor({ toolset: 'coding', tools: ['*_file', '!write_file'] })).toEqual(['edit_file', 'read_file']);
    // The patterns replace the toolset: a tool outside it is admitted by name.
    expect(await offerFor({ tools: ['rag_index'] })).toEqual(['rag_index']);
    expect(await offerFor({ toolset: 'minimal', tools: ['terminal', 'read_file'] })).toEqual(['read_file', 'terminal']);
    expect(await offerFor({ toolset: 'coding', tools: ['grep', '!grep'] })).toEqual([]);
    expect(model.requests[model.requests.length - 1].body.tools).toBeUndefined();
  });

  it('says on the run object and run.started which tools the run has, where each came from, and which names it dropped', async () => {
    model.enqueue({ content: 'ok' });
    const { id } = await runs.start({
      input: 'what can you use?',
      toolset: 'minimal',
      tools: ['read_file', 'rag_*', 'no_such_tool', '!grep'],
      enabled: ['terminal', 'ghost_tool'],
      disabled: ['rag_index'],
    });
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');
    const tools = [
      { name: 'rag_search', source: 'tools:rag_*' },
      { name: 'read_file', source: 'tools:read_file' },
      { name: 'terminal', source: 'enabled' },
    ];
    const dropped = [
      { name: 'no_such_tool', reason: 'unknown' },
      { name: 'ghost_tool', reason: 'unknown' },
      { name: 'rag_index', reason: 'disabled' },
    ];
    expect(run.tools).toEqual(tools);
    expect(run.tools_dropped).toEqual(dropped);
    expect(ScriptedModelServer.offeredTools(model.requests[model.requests.length - 1])).toEqual(tools.map((t) => t.name));
    const started = (await readRunEvents(stack.url, runs.key, id)).find((e) => e.event === 'run.started');
    expect(started?.data).toMatchObject({ tools, tools_dropped: dropped });
    const listed = (await stack.request('GET', `/v1/runs/${id}`, { key: runs.key })).body;
    expect(listed.tools).toEqual(tools);
  });

  it('GET /v1/tools says whether each tool is available here', () => {
    for (const tool of catalogue as Array<{ name: string; available?: boolean; unavailable_reason?: string }>) {
      expect(tool.available).toBe(true);
      expect(tool.unavailable_reason).toBeUndefined();
    }
  });

  it('refuses a call to a tool the run was not offered, runs nothing, and tells the model', async () => {
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_t', name: 'terminal', arguments: { command: 'touch /workspace/should-not-exist' } },
          { id: 'call_x', name: 'launch_rockets', arguments: {} },
          { id: 'call_l', name: 'list_files', arguments: {} },
        ],
      },
      { content: 'understood' },
    );
    const { id, session_id } = await runs.start({ input: 'try', toolset: 'minimal' });
    expect((await runs.wait(id)).status).toBe('completed');
    expect(await runs.toolResult(session_id, 'call_t')).toMatch(/^refused: tool terminal is not available in this run, so nothing ran\. The tools you can call are: .*read_file/);
    expect(await runs.toolResult(session_id, 'call_x')).toMatch(/^refused: tool launch_rockets is not available/);
    expect(await runs.toolResult(session_id, 'call_l')).not.toContain('should-not-exist');
    const rows = await runs.toolCallRows(id);
    expect(rows.map((r) => [r.call_id, r.status, r.decision])).toEqual([
      ['call_t', 'refused', 'not_offered'],
      ['call_x', 'refused', 'not_offered'],
      ['call_l', 'completed', 'read_only'],
    ]);
    expect((await runs.tool(session_id, 'list_files', {})).output).not.toContain('should-not-exist');
  });

  it('refuses a call whose arguments are not valid, naming the problem', async () => {
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_bad', name: 'read_file', arguments: { nope: 1 } },
          { id: 'call_json', name: 'read_file', arguments: '{"path": ' },
        ],
      },
      { content: 'ok' },
    );
    const { id, session_id } = await runs.start({ input: 'x' });
    await runs.wait(id);
    expect(await runs.toolResult(session_id, 'call_bad')).toMatch(/refused: invalid arguments for read_file: arguments\.path/);
    expect(await runs.toolResult(session_id, 'call_json')).toMatch(/not valid JSON/);
  });

  it('warns at warn_after and stops tools at hard_stop_after, asking the model to finish', async () => {
    const echo = (n: number) => ({ id: `call_${n}`, name: 'terminal', arguments: { command: `echo ran-${n} >> /workspace/ran.txt` } });
    model.enqueue(
      { toolCalls: [echo(1), echo(2)] },
      { toolCalls: [echo(3), echo(4)] },
      { toolCalls: [echo(5), echo(6), echo(7)] },
      { content: 'summary of the work' },
    );
    const { id, session_id } = await runs.start({ input: 'work', limits: { warn_after: 3, hard_stop_after: 5 } });
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events[events.length - 1].event).toBe('run.completed');

    const warnings = events.filter((e) => e.event === 'guardrail.warning');
    expect(warnings.map((w) => [w.data.kind, w.data.tool_calls])).toEqual([
      ['warning', 3],
      ['hard_stop', 5],
    ]);
    expect(await runs.toolResult(session_id, 'call_2')).not.toContain('[runbox]');
    expect(await runs.toolResult(session_id, 'call_3')).toContain('[runbox] You have made 3 tool calls in this run; at 5 no more tools will run');
    expect(await runs.toolResult(session_id, 'call_5')).toContain('the last one this run may make (hard_stop_after=5)');
    for (const n of [6, 7]) expect(await runs.toolResult(session_id, `call_${n}`)).toMatch(/^refused: this run reached its limit of 5 tool calls/);
    const ran = await runs.tool(session_id, 'read_file', { path: 'ran.txt' });
    expect(ran.output.match(/ran-\d/g)?.sort()).toEqual(['ran-1', 'ran-2', 'ran-3', 'ran-4', 'ran-5']);

    // After the stop the model is offered no tools, and its answer ends the run.
    expect(model.requests[3].body.tools).toBeUndefined();
    expect(model.requests[2].body.tools?.length).toBeGreaterThan(0);
    const run = (await runs.get(id)).body;
    expect(run).toMatchObject({ status: 'completed', output: 'summary of the work' });
    expect(run.usage.tool_calls).toBe(7);
  });

  it('warns at warn_after even when that call is refused', async () => {
    const echo = (n: number) => ({ id: `call_${n}`, name: 'terminal', arguments: { command: `echo ${n}` } });
    model.enqueue({ toolCalls: [echo(1), echo(2), { id: 'call_3', name: 'launch_rockets', arguments: {} }] }, { content: 'done' });
    const { id, session_id } = await runs.start({ input: 'refused at the warning', limits: { warn_after: 3, hard_stop_after: 5 } });
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events.filter((e) => e.event === 'guardrail.warning').map((w) => [w.data.kind, w.data.tool_calls])).toEqual([['warning', 3]]);
    const refused = await runs.toolResult(session_id, 'call_3');
    expect(refused).toMatch(/^refused: tool launch_rockets is not available in this run/);
    expect(refused).toContain('[runbox] You have made 3 tool calls in this run; at 5 no more tools will run');
  });

  it('uses warn_after 24 and hard_stop_after 32 by default', async () => {
    const calls = Array.from({ length: 34 }, (_, i) => ({ id: `call_${i + 1}`, name: 'terminal', arguments: { command: `echo n-${i + 1}` } }));
    model.enqueue({ toolCalls: calls }, { content: 'done' });
    const { id, session_id } = await runs.start({ input: 'many' });
    const events = await readRunEvents(stack.url, runs.key, id);
    // The calls run concurrently, so the two notes may arrive in either order.
    expect(events.filter((e) => e.event === 'guardrail.warning').map((w) => w.data.tool_calls).sort()).toEqual([24, 32]);
    expect(await runs.toolResult(session_id, 'call_24')).toContain('You have made 24 tool calls');
    expect(await runs.toolResult(session_id, 'call_33')).toMatch(/^refused: this run reached its limit of 32/);
    const rows = await runs.toolCallRows(id);
    expect(rows.filter((r) => r.status === 'completed')).toHaveLength(32);
    expect(rows.filter((r) => r.decision === 'hard_stop').map((r) => r.seq)).toEqual([33, 34]);
  });

  it('fails the run when the model keeps calling tools after the hard stop', async () => {
    const call = (n: number) => ({ id: `call_${n}`, name: 'terminal', arguments: { command: `echo ${n}` } });
    model.enqueue({ toolCalls: [call(1)] }, { toolCalls: [call(2)] }, { toolCalls: [call(3)] }, { content: 'never asked for' });
    const { id } = await runs.start({ input: 'loop', limits: { hard_stop_after: 1 } });
    const run = await runs.wait(id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/kept calling tools after the run's limit of 1 tool calls/);
    expect(model.requests).toHaveLength(3);
  });

  it('refuses the same call with the same arguments after repeat_limit in a row, telling the model why', async () => {
    const same = { name: 'terminal', arguments: { command: 'echo same >> /workspace/rep.txt' } };
    model.enqueue(
      { toolCalls: [1, 2, 3, 4].map((n) => ({ id: `call_s${n}`, ...same })) },
      { toolCalls: [{ id: 'call_other', name: 'terminal', arguments: { command: 'echo other' } }] },
      { toolCalls: [{ id: 'call_s5', ...same }] },
      { content: 'done' },
    );
    const { id, session_id } = await runs.start({ input: 'repeat' });
    expect((await runs.wait(id)).status).toBe('completed');
    expect(await runs.toolResult(session_id, 'call_s4')).toMatch(/^refused: you already made this exact call \(terminal with the same arguments\) 3 times in a row/);
    const rows = await runs.toolCallRows(id);
    expect(rows.map((r) => r.status)).toEqual(['completed', 'completed', 'completed', 'refused', 'completed', 'completed']);
    expect(rows[3].decision).toBe('repetition');
    // Three ran, the fourth did not; after a different call the streak starts over.
    const file = await runs.tool(session_id, 'read_file', { path: 'rep.txt' });
    expect(file.output.match(/same/g)).toHaveLength(4);
  });

  it('honours a run-level repeat_limit', async () => {
    const same = { name: 'read_file', arguments: { path: 'nothing.txt' } };
    model.enqueue({ toolCalls: [{ id: 'call_a', ...same }] }, { toolCalls: [{ id: 'call_b', ...same }] }, { content: 'done' });
    const { id } = await runs.start({ input: 'x', limits: { repeat_limit: 1 } });
    await runs.wait(id);
    expect((await runs.toolCallRows(id)).map((r) => r.decision)).toEqual(['read_only', 'repetition']);
  });
});
