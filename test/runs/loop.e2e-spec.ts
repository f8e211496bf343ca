import { ScriptedModelServer } from '@app/testing';
import Docker from 'dockerode';
import { eventually, gate, RunsClient } from '../support/runs';
import { readRunEvents } from '../support/sse';
import { TestStack } from '../support/test-stack';

/**
 * The agent loop through the HTTP API: events and their order, idempotency, the system
 * text, concurrent tool calls, a busy session, limits on output and time, cancel, and a
 * failing provider or executor.
 */
describe('runs: the loop', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;
  const docker = new Docker();

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  it('streams every event in order with increasing ids, and Last-Event-ID resumes after the given one', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_a', name: 'terminal', arguments: { command: 'echo hi' } }] }, { content: 'all done' });
    const { id } = await runs.start({ input: 'say hi' });
    const events = await readRunEvents(stack.url, runs.key, id);

    expect(events.map((e) => e.event)).toEqual([
      'run.queued',
      'run.started',
      'message.created',
      'message.created',
      'tool_call.started',
      'tool_call.completed',
      'message.created',
      'run.completed',
    ]);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events[2].data).toMatchObject({ role: 'user', content: 'say hi' });
    expect(events[3].data.tool_calls).toEqual([{ id: 'call_a', name: 'terminal', arguments: '{"command":"echo hi"}' }]);
    expect(events[5].data).toMatchObject({ tool_call_id: 'call_a', name: 'terminal', status: 'completed', is_error: false });
    expect(events[5].data.output).toContain('hi');
    expect(events[7].data).toMatchObject({ output: 'all done' });

    // A client that reconnects gets only what came after the id it saw.
    const resumed = await readRunEvents(stack.url, runs.key, id, { lastEventId: 5 });
    expect(resumed.map((e) => [e.id, e.event])).toEqual(events.slice(5).map((e) => [e.id, e.event]));
    // One that had seen the end already gets an empty stream that ends, not keepalives for ever.
    expect(await readRunEvents(stack.url, runs.key, id, { lastEventId: 8, timeoutMs: 10_000 })).toEqual([]);

    const run = (await runs.get(id)).body;
    expect(run).toMatchObject({ status: 'completed', output: 'all done' });
    expect(run.usage).toMatchObject({ input_tokens: 20, output_tokens: 10, model_calls: 2, tool_calls: 1 });
    expect(run.usage.wall_ms).toEqual(expect.any(Number));
    expect(run.completed_at).toEqual(expect.any(String));
  });

  it('returns the first run for a repeated Idempotency-Key and makes nothing new', async () => {
    model.enqueue({ content: 'once' });
    const headers = { 'idempotency-key': `key-${Date.now()}` };
    const first = await runs.create({ input: 'only once' }, headers);
    expect(first.status).toBe(202);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const second = await runs.create({ input: 'only once' }, headers);
    expect(second.status).toBe(202);
    expect(second.body.id).toBe(first.body.id);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    await runs.wait(first.body.id);
    const third = await runs.create({ input: 'only once' }, headers);
    expect(third.body).toMatchObject({ id: first.body.id, status: 'completed' });

    const listed = await stack.request('GET', `/v1/runs?session_id=${first.body.session_id}`, { key: runs.key });
    expect(listed.body.data.map((r: { id: string }) => r.id)).toEqual([first.body.id]);
    expect(model.requests).toHaveLength(1);
  });

  it('expands {{tools}} to the manifest of exactly the tools the run may use, and adds nothing else to system', async () => {
    model.enqueue({ content: 'ok' }, { content: 'ok' });
    const catalogue = (await stack.request('GET', '/v1/tools', { key: runs.key })).body.data as Array<{ name: string; description: string; toolsets: string[] }>;
    const minimal = catalogue.filter((t) => t.toolsets.includes('minimal')).sort((a, b) => a.name.localeCompare(b.name));
    expect(minimal.map((t) => t.name)).toEqual(expect.arrayContaining(['grep', 'list_files', 'read_file']));

    const first = await runs.start({ input: 'x', toolset: 'minimal', system: 'You are careful.\nTools:\n{{tools}}\nThat is all.' });
    await runs.wait(first.id);
    const [system] = model.requests[0].body.messages;
    expect(system.role).toBe('system');
    expect(system.content).toBe(`You are careful.\nTools:\n${minimal.map((t) => `- ${t.name}: ${t.description}`).join('\n')}\nThat is all.`);
    expect(ScriptedModelServer.offeredTools(model.requests[0])).toEqual(minimal.map((t) => t.name));

    // Without a system text there is no system message at all.
    const second = await runs.start({ input: 'y' });
    await runs.wait(second.id);
    expect(model.requests[1].body.messages.map((m) => m.role)).toEqual(['user']);
  });

  it('runs one turn of tool calls concurrently, but calls on the same file in order', async () => {
    // Each terminal call waits for the other to have started: only concurrent calls can both meet.
    const rendezvous = (me: string, other: string) =>
      `touch /tmp/${me}; for i in $(seq 1 300); do [ -e /tmp/${other} ] && echo met-${me} && exit 0; sleep 0.1; done; echo alone-${me}`;
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_x', name: 'terminal', arguments: { command: rendezvous('x', 'y') } },
          { id: 'call_w', name: 'write_file', arguments: { path: 'notes.txt', content: 'one\n' } },
          { id: 'call_y', name: 'terminal', arguments: { command: rendezvous('y', 'x') } },
          { id: 'call_e', name: 'edit_file', arguments: { path: './notes.txt', old_string: 'one', new_string: 'two' } },
          { id: 'call_r', name: 'read_file', arguments: { path: '/workspace/notes.txt' } },
        ],
      },
      { content: 'finished' },
    );
    const { id, session_id } = await runs.start({ input: 'go' });
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events[events.length - 1].event).toBe('run.completed');

    expect(await runs.toolResult(session_id, 'call_x')).toContain('met-x');
    expect(await runs.toolResult(session_id, 'call_y')).toContain('met-y');
    expect(await runs.toolResult(session_id, 'call_r')).toContain('two');

    // The three calls on notes.txt started only after the previous one completed.
    const at = (type: string, callId: string) => events.find((e) => e.event === type && e.data.tool_call_id === callId)!.id;
    expect(at('tool_call.completed', 'call_w')).toBeLessThan(at('tool_call.started', 'call_e'));
    expect(at('tool_call.completed', 'call_e')).toBeLessThan(at('tool_call.started', 'call_r'));
    // The model got every result before its next turn, and saw the history in order.
    const last = model.requests[1].body.messages;
    expect(last.filter((m) => m.role === 'tool').map((m) => m.tool_call_id).sort()).toEqual(['call_e', 'call_r', 'call_w', 'call_x', 'call_y']);
  });

  it('answers 409 to a second run on a busy session, and queues it with on_busy: "enqueue"', async () => {
    const hold = gate();
    model.enqueue(async () => {
      await hold.wait;
      return { content: 'first done' };
    });
    const first = await runs.start({ input: 'first' });
    await eventually('the first run to start', async () => ((await runs.get(first.id)).body.status === 'running' ? true : undefined));

    const refused = await runs.create({ session_id: first.session_id, input: 'second' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    expect(refused.body.error.message).toMatch(/busy.*on_busy/);

    model.enqueue((req) => ({ content: `second saw ${req.body.messages.map((m) => m.content).join(' | ')}` }));
    const queued = await runs.create({ session_id: first.session_id, input: 'second', on_busy: 'enqueue' });
    expect(queued.status).toBe(202);
    expect(queued.body.status).toBe('queued');
    // It does not start while the first one runs.
    expect((await runs.get(queued.body.id)).body.status).toBe('queued');

    hold.open();
    const firstRun = await runs.wait(first.id);
    const secondRun = await runs.wait(queued.body.id);
    expect(secondRun.output).toBe('second saw first | first done | second');
    expect(new Date(secondRun.started_at).getTime()).toBeGreaterThanOrEqual(new Date(firstRun.completed_at).getTime());
  });

  it('cuts tool output at max_output_chars (default 30000) with a note of what was cut', async () => {
    model.enqueue(
      { toolCalls: [{ id: 'call_big', name: 'terminal', arguments: { command: "head -c 40000 /dev/zero | tr '\\0' x" } }] },
      { content: 'seen' },
    );
    const big = await runs.start({ input: 'big' });
    await runs.wait(big.id);
    const full = await runs.toolResult(big.session_id, 'call_big');
    expect(full).toMatch(/characters cut \(max_output_chars=30000\)/);
    expect(full.length).toBeLessThanOrEqual(30_000 + 100);
    expect(full.length).toBeGreaterThan(29_000);

    model.enqueue(
      { toolCalls: [{ id: 'call_small', name: 'terminal', arguments: { command: "head -c 3000 /dev/zero | tr '\\0' y" } }] },
      { content: 'seen' },
    );
    const small = await runs.start({ input: 'small', limits: { max_output_chars: 500 } });
    await runs.wait(small.id);
    const cut = await runs.toolResult(small.session_id, 'call_small');
    expect(cut).toMatch(/… \d+ characters cut \(max_output_chars=500\)/);
    expect(cut.length).toBeLessThanOrEqual(500 + 100);
  });

  it('applies a per-tool timeout from limits.timeouts', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_slow', name: 'terminal', arguments: { command: 'sleep 60' } }] }, { content: 'gave up' });
    const run = await runs.start({ input: 'slow', limits: { timeouts: { terminal: 2 } } });
    expect((await runs.wait(run.id)).status).toBe('completed');
    const result = await runs.toolResult(run.session_id, 'call_slow');
    expect(result).toContain('status: timed_out');
    expect(result).toMatch(/timed out after 2 seconds/);
  });

  it('cancels a run promptly: the running tool is interrupted, the container stays, the session takes the next run', async () => {
    model.enqueue({
      toolCalls: [{ id: 'call_long', name: 'terminal', arguments: { command: 'echo started > c.txt; sleep 120; echo finished >> c.txt', max_wait_ms: 600000 } }],
    });
    const { id, session_id } = await runs.start({ input: 'long job' });
    await eventually('the command to start', async () => {
      const probe = await runs.tool(session_id, 'terminal', { command: 'cat c.txt 2>/dev/null || true' });
      return probe.output.includes('started') ? true : undefined;
    });

    const cancelled = await runs.cancel(id);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id, status: 'cancelled' });
    // Its usage is final too: the model call it made, and the wall time until the cancel.
    expect(cancelled.body.usage).toMatchObject({ model_calls: 1, wall_ms: expect.any(Number) });
    expect(cancelled.body.usage.wall_ms).toBeGreaterThan(0);
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events[events.length - 1].event).toBe('run.cancelled');

    // The sleep was killed in the sandbox; the container is still there.
    await eventually('the command to be killed', async () => {
      const ps = await runs.tool(session_id, 'terminal', { command: 'ps -eo args | grep -c "^sleep 120" || true' });
      return /stdout:\n0(\n|$)/.test(ps.output) ? true : undefined;
    });
    expect((await runs.tool(session_id, 'read_file', { path: 'c.txt' })).output).not.toContain('finished');
    const containers = await docker.listContainers({ filters: { label: [`runbox.session=${session_id}`] } });
    expect(containers).toHaveLength(1);
    expect(await runs.toolResult(session_id, 'call_long')).toMatch(/^cancelled/);
    expect((await runs.toolCallRows(id)).map((r) => r.status)).toEqual(['cancelled']);
    expect(model.requests).toHaveLength(1);

    // Cancelling again changes nothing; the session is free for the next run, which sees the cancelled call.
    expect((await runs.cancel(id)).body.status).toBe('cancelled');
    model.enqueue((req) => ({ content: `saw: ${req.body.messages.find((m) => m.role === 'tool')?.content?.slice(0, 9)}` }));
    const next = await runs.start({ session_id, input: 'again' });
    expect((await runs.wait(next.id)).output).toBe('saw: cancelled');
    const late = await runs.cancel(next.id);
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('conflict');
  });

  it('deleting a session cancels its running and queued runs, and nothing queued starts', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_busy', name: 'terminal', arguments: { command: 'echo up > up.txt; sleep 95', max_wait_ms: 600000 } }] });
    const { id, session_id } = await runs.start({ input: 'busy until deleted' });
    await eventually('the command to start', async () => {
      const probe = await runs.tool(session_id, 'terminal', { command: 'cat up.txt 2>/dev/null || true' });
      return probe.output.includes('up') ? true : undefined;
    });
    const queued = await runs.start({ session_id, input: 'queued behind it', on_busy: 'enqueue' });

    const deleted = await stack.request('DELETE', `/v1/sessions/${session_id}`, { key: runs.key });
    expect(deleted.status).toBe(204);
    for (const runId of [id, queued.id]) {
      expect((await runs.get(runId)).body.status).toBe('cancelled');
      const events = await readRunEvents(stack.url, runs.key, runId);
      expect(events[events.length - 1]).toMatchObject({ event: 'run.cancelled', data: { reason: 'the session was deleted' } });
    }
    expect((await runs.toolCallRows(id)).map((r) => r.status)).toEqual(['cancelled']);
    expect(await docker.listContainers({ all: true, filters: { label: [`runbox.session=${session_id}`] } })).toHaveLength(0);
    // Only the first run's one model call was ever made: the queued run never started.
    expect(model.requests).toHaveLength(1);
  });

  it('cancels a run while the model is thinking, and the run queued behind it starts', async () => {
    const hold = gate();
    model.enqueue(async () => {
      await hold.wait;
      return { content: 'too late' };
    });
    const first = await runs.start({ input: 'think hard' });
    await eventually('the model call', async () => (model.requests.length === 1 ? true : undefined));
    model.enqueue({ content: 'second ran' });
    const queued = await runs.start({ session_id: first.session_id, input: 'next', on_busy: 'enqueue' });

    expect((await runs.cancel(first.id)).body.status).toBe('cancelled');
    expect((await runs.wait(queued.id)).output).toBe('second ran');
    hold.open();
    // The abandoned answer is never stored: the first run ends with its cancel.
    const events = await readRunEvents(stack.url, runs.key, first.id);
    expect(events.map((e) => e.event)).toEqual(['run.queued', 'run.started', 'message.created', 'run.cancelled']);
    const messages = await runs.messages(first.session_id);
    expect(messages.map((m) => m.content)).toEqual(['think hard', 'next', 'second ran']);
  });

  it('ends failed with a readable error when the provider keeps answering 500', async () => {
    // The last body quotes a connection error of the provider's own: that is the provider's
    // failure to report, not Runbox's database or NATS being away, so the run is not retried.
    model.enqueue(
      { status: 500, body: '{"error":{"message":"upstream exploded"}}' },
      { status: 500 },
      { status: 502, body: 'bad gateway: connect ECONNREFUSED 10.0.0.1:443' },
    );
    const { id } = await runs.start({ input: 'x' });
    const run = await runs.wait(id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/HTTP 502.*ECONNREFUSED/);
    expect(model.requests).toHaveLength(3);
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events[events.length - 1]).toMatchObject({ event: 'run.failed', data: { error: run.error } });
  });

  it('ends failed with a readable error when no executor serves the session', async () => {
    await stack.stopExecutor();
    try {
      model.enqueue({ toolCalls: [{ id: 'call_t', name: 'terminal', arguments: { command: 'true' } }] });
      const { id, session_id } = await runs.start({ input: 'x' });
      const run = await runs.wait(id);
      expect(run.status).toBe('failed');
      expect(run.error).toMatch(/tool terminal could not run: no executor/);
      // The call the run could not finish has a result, so the session's history stays valid.
      expect(await runs.toolResult(session_id, 'call_t')).toMatch(/^failed/);
    } finally {
      await stack.startExecutor();
    }
  });
});
