import { ScriptedModelServer } from '@app/testing';
import { RunsClient } from '../support/runs';
import { readRunEvents } from '../support/sse';
import { TestStack } from '../support/test-stack';

/** Approval modes, permission rules and the approval timeout, through the HTTP API. */
describe('runs: approvals and permissions', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_RUN_SWEEP_SECONDS: '0.5' } }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  const terminal = (id: string, command: string) => ({ id, name: 'terminal', arguments: { command } });

  it('prompt: pauses in requires_approval, runs read-only calls meanwhile, and goes on once approved', async () => {
    model.enqueue(
      { toolCalls: [terminal('call_w', 'echo approved > a.txt'), { id: 'call_l', name: 'list_files', arguments: {} }] },
      (req) => ({ content: `result: ${req.body.messages.find((m) => m.tool_call_id === 'call_w')?.content?.split('\n')[0]}` }),
    );
    const { id, session_id } = await runs.start({ input: 'write it', approval_mode: 'prompt' });
    const untilPaused = await readRunEvents(stack.url, runs.key, id, { until: (e) => e.event === 'run.requires_approval' });
    const asked = untilPaused.find((e) => e.event === 'tool_call.approval_required')!;
    expect(asked.data).toMatchObject({ tool_call_id: 'call_w', name: 'terminal', arguments: { command: 'echo approved > a.txt' } });
    expect(Date.parse(asked.data.expires_at)).toBeGreaterThan(Date.now());
    // The read-only call did not wait for the decision.
    expect(untilPaused.some((e) => e.event === 'tool_call.completed' && e.data.tool_call_id === 'call_l')).toBe(true);

    const waiting = (await runs.get(id)).body;
    expect(waiting.status).toBe('requires_approval');
    expect(waiting.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_w', name: 'terminal' })]);
    expect((await runs.tool(session_id, 'list_files', {})).output).not.toContain('a.txt');
    expect(model.requests).toHaveLength(1);

    const approved = await runs.decide(id, { tool_call_id: 'call_w', decision: 'approve' });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ id, tool_call_id: 'call_w', decision: 'approve' });
    const run = await runs.wait(id);
    expect(run).toMatchObject({ status: 'completed', output: 'result: status: exited' });
    expect((await runs.tool(session_id, 'read_file', { path: 'a.txt' })).output).toContain('approved');

    const events = await readRunEvents(stack.url, runs.key, id);
    const types = events.map((e) => e.event);
    expect(types.indexOf('tool_call.approved')).toBeGreaterThan(types.indexOf('run.requires_approval'));
    expect(events.find((e) => e.event === 'run.resumed')?.data.reason).toBe('approval');
    expect((await runs.toolCallRows(id)).find((r) => r.call_id === 'call_w')).toMatchObject({ status: 'completed', decision: 'approved' });
  });

  it('prompt: a denial becomes a tool result the model sees, and nothing runs', async () => {
    model.enqueue({ toolCalls: [terminal('call_d', 'touch denied.txt')] }, (req) => ({
      content: req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content ?? 'none',
    }));
    const { id, session_id } = await runs.start({ input: 'try', approval_mode: 'prompt' });
    await runs.wait(id, ['requires_approval']);
    expect((await runs.decide(id, { tool_call_id: 'call_d', decision: 'deny', reason: 'not today' })).status).toBe(200);
    const run = await runs.wait(id);
    expect(run.output).toBe('denied: the approver refused this call (reason: not today), so nothing ran.');
    expect((await runs.tool(session_id, 'list_files', {})).output).not.toContain('denied.txt');
    expect((await runs.toolCallRows(id))[0]).toMatchObject({ status: 'refused', decision: 'denied' });
  });

  it('deny: refuses every mutating tool with a clear result, reading still works, nobody is asked', async () => {
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_w', name: 'write_file', arguments: { path: 'x.txt', content: 'x' } },
          terminal('call_t', 'echo hi'),
          { id: 'call_r', name: 'list_files', arguments: {} },
        ],
      },
      { content: 'ok' },
    );
    const { id, session_id } = await runs.start({ input: 'x', approval_mode: 'deny' });
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events.map((e) => e.event)).not.toContain('tool_call.approval_required');
    expect(await runs.toolResult(session_id, 'call_w')).toBe(
      "refused: write_file changes state and this run's approval mode is deny, so nothing ran. Tools that only read still work.",
    );
    expect(await runs.toolResult(session_id, 'call_t')).toMatch(/^refused: terminal changes state/);
    expect((await runs.toolCallRows(id)).map((r) => [r.status, r.decision])).toEqual([
      ['refused', 'mode_deny'],
      ['refused', 'mode_deny'],
      ['completed', 'read_only'],
    ]);
  });

  it('permission rules decide before the mode: deny wins over ask, ask over allow; compound commands need every part allowed', async () => {
    model.enqueue(
      {
        toolCalls: [
          terminal('call_safe', 'echo safe one'),
          terminal('call_chained', 'echo safe two && touch hacked'),
          terminal('call_rm', 'rm -rf out'),
          terminal('call_force', 'git push --force origin'),
          terminal('call_push', 'git push origin main'),
          { id: 'call_out', name: 'write_file', arguments: { path: '/workspace/out/a.txt', content: 'a' } },
          { id: 'call_notes', name: 'write_file', arguments: { path: 'notes.txt', content: 'n' } },
        ],
      },
      { content: 'done' },
    );
    const { id } = await runs.start({
      input: 'x',
      approval_mode: 'prompt',
      permissions: {
        allow: ['terminal(echo safe *)', 'write_file(out/*)', 'terminal(git push *)'],
        ask: ['terminal(git push *)'],
        deny: ['terminal(rm *)', 'terminal(git push --force *)'],
      },
    });
    await runs.wait(id, ['requires_approval']);
    const pending = (await runs.get(id)).body.pending_approvals.map((p: { tool_call_id: string }) => p.tool_call_id);
    expect(pending).toEqual(['call_chained', 'call_push', 'call_notes']);
    for (const callId of pending) await runs.decide(id, { tool_call_id: callId, decision: 'deny' });
    await runs.wait(id);
    const rows = Object.fromEntries((await runs.toolCallRows(id)).map((r) => [r.call_id, [r.status, r.decision]]));
    expect(rows).toEqual({
      call_safe: ['completed', 'rule_allow'],
      call_chained: ['refused', 'denied'],
      call_rm: ['refused', 'rule_deny'],
      call_force: ['refused', 'rule_deny'],
      call_push: ['refused', 'denied'],
      call_out: ['completed', 'rule_allow'],
      call_notes: ['refused', 'denied'],
    });
    const force = (await runs.toolCallRows(id)).find((r) => r.call_id === 'call_force')!;
    expect(force.output).toBe('refused: the permission rule deny terminal(git push --force *) forbids this call, so nothing ran.');
  });

  it('an ask rule asks even in auto mode; an allow rule lets a call through even in deny mode', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_s', name: 'write_file', arguments: { path: 'secrets/k', content: 'k' } }] }, { content: 'ok' });
    const auto = await runs.start({ input: 'x', approval_mode: 'auto', permissions: { ask: ['write_file(secrets/*)'] } });
    await runs.wait(auto.id, ['requires_approval']);
    await runs.decide(auto.id, { tool_call_id: 'call_s', decision: 'approve' });
    expect((await runs.wait(auto.id)).status).toBe('completed');
    expect((await runs.toolCallRows(auto.id))[0]).toMatchObject({ status: 'completed', decision: 'approved' });

    model.enqueue(
      {
        toolCalls: [
          { id: 'call_in', name: 'write_file', arguments: { path: 'out/b.txt', content: 'b' } },
          { id: 'call_elsewhere', name: 'write_file', arguments: { path: 'b.txt', content: 'b' } },
        ],
      },
      { content: 'ok' },
    );
    const deny = await runs.start({ input: 'x', approval_mode: 'deny', permissions: { allow: ['write_file(out/*)'] } });
    await runs.wait(deny.id);
    expect((await runs.toolCallRows(deny.id)).map((r) => [r.call_id, r.status, r.decision])).toEqual([
      ['call_in', 'completed', 'rule_allow'],
      ['call_elsewhere', 'refused', 'mode_deny'],
    ]);
  });

  it('judges multi-action tools per call: memory save and skill write are refused in deny mode and asked about in prompt mode, their reads run', async () => {
    const calls = [
      { id: 'call_save', name: 'memory', arguments: { action: 'save', content: 'Deploys need a ticket id.' } },
      { id: 'call_search', name: 'memory', arguments: { action: 'search', query: 'deploy' } },
      { id: 'call_write', name: 'skill', arguments: { action: 'write', name: 'release-steps', content: '# Release\nUse when shipping.' } },
      { id: 'call_list', name: 'skill', arguments: { action: 'list' } },
    ];
    model.enqueue({ toolCalls: calls }, { content: 'ok' });
    const deny = await runs.start({ input: 'remember', toolset: 'research', approval_mode: 'deny' });
    await runs.wait(deny.id);
    expect((await runs.toolCallRows(deny.id)).map((r) => [r.call_id, r.status, r.decision])).toEqual([
      ['call_save', 'refused', 'mode_deny'],
      ['call_search', 'completed', 'read_only'],
      ['call_write', 'refused', 'mode_deny'],
      ['call_list', 'completed', 'read_only'],
    ]);
    expect(await runs.toolResult(deny.session_id, 'call_save')).toMatch(/^refused: memory changes state and this run's approval mode is deny/);
    expect((await stack.request('GET', '/v1/memory?query=ticket', { key: runs.key })).body.data).toEqual([]);

    model.enqueue({ toolCalls: calls }, { content: 'ok' });
    const prompt = await runs.start({ input: 'remember', toolset: 'research', approval_mode: 'prompt' });
    await runs.wait(prompt.id, ['requires_approval']);
    const pending = (await runs.get(prompt.id)).body.pending_approvals.map((p: { tool_call_id: string }) => p.tool_call_id);
    expect(pending).toEqual(['call_save', 'call_write']);
    for (const callId of pending) await runs.decide(prompt.id, { tool_call_id: callId, decision: 'deny' });
    await runs.wait(prompt.id);
    expect((await runs.toolCallRows(prompt.id)).map((r) => r.decision)).toEqual(['denied', 'read_only', 'denied', 'read_only']);
  });

  it('denies an approval nobody decides within the approval timeout, and the model is told', async () => {
    model.enqueue({ toolCalls: [terminal('call_late', 'touch late.txt')] }, (req) => ({
      content: req.body.messages.find((m) => m.tool_call_id === 'call_late')?.content ?? 'none',
    }));
    const { id, session_id } = await runs.start({ input: 'x', approval_mode: 'prompt', limits: { approval_timeout_seconds: 1 } });
    const run = await runs.wait(id);
    expect(run.status).toBe('completed');
    expect(run.output).toBe('denied: nobody approved or denied this call within 1 seconds (the approval timeout), so nothing ran.');
    expect((await runs.tool(session_id, 'list_files', {})).output).not.toContain('late.txt');
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events.find((e) => e.event === 'tool_call.denied')?.data).toMatchObject({ tool_call_id: 'call_late', by: 'timeout' });
    expect((await runs.toolCallRows(id))[0].decision).toBe('timed_out');
  });

  it('answers bad approvals with 4xx, and cancelling a waiting run closes its pending calls', async () => {
    model.enqueue({ toolCalls: [terminal('call_p', 'true'), terminal('call_q', 'true')] });
    const { id, session_id } = await runs.start({ input: 'x', approval_mode: 'prompt' });
    await runs.wait(id, ['requires_approval']);
    const missing = await runs.decide(id, { tool_call_id: 'call_nope', decision: 'approve' });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    const invalid = await runs.decide(id, { tool_call_id: 'call_p', decision: 'maybe' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.message).toMatch(/body\.decision/);
    expect((await runs.decide(id, { tool_call_id: 'call_p', decision: 'approve' })).status).toBe(200);
    const twice = await runs.decide(id, { tool_call_id: 'call_p', decision: 'deny' });
    expect(twice.status).toBe(409);
    expect(twice.body.error.message).toMatch(/not waiting for approval/);
    // call_q still waits, so the run is still paused.
    expect((await runs.get(id)).body.status).toBe('requires_approval');

    expect((await runs.cancel(id)).body.status).toBe('cancelled');
    const after = await runs.decide(id, { tool_call_id: 'call_q', decision: 'approve' });
    expect(after.status).toBe(409);
    expect((await runs.toolCallRows(id)).map((r) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect(await runs.toolResult(session_id, 'call_q')).toMatch(/^cancelled/);
    const other = await stack.createTenant();
    expect((await stack.request('POST', `/v1/runs/${id}/approvals`, { key: other.apiKey, body: { tool_call_id: 'call_q', decision: 'approve' } })).status).toBe(404);
  });

  it('rejects malformed permission rules and limits with 400 naming the field', async () => {
    const bad = await runs.create({ input: 'x', permissions: { allow: ['terminal(npm test'] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/body\.permissions\.allow\.0/);
    const limits = await runs.create({ input: 'x', limits: { warn_after: 10, hard_stop_after: 5 } });
    expect(limits.status).toBe(400);
    expect(limits.body.error.message).toMatch(/warn_after must be less than hard_stop_after/);
  });
});
