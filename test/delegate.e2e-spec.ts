import { ScriptedModelServer } from '@app/testing';
import { eventually, RunsClient } from './support/runs';
import { readRunEvents } from './support/sse';
import { TestStack } from './support/test-stack';

const sentBy = ScriptedModelServer.sentBy;

/**
 * delegate_task end to end: a sub-run with a fresh context and at most its parent's tools,
 * whose final answer is all the parent sees; its approvals, its depth limit, and cancel.
 */
describe('delegate_task', () => {
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

  const requestsOf = (text: string) => model.requests.filter(sentBy(text));

  async function subRunsOf(runId: string) {
    const res = await stack.request('GET', `/v1/runs?parent_run_id=${runId}`, { key: runs.key });
    expect(res.status).toBe(200);
    return res.body.data as Array<Record<string, any>>;
  }

  it('returns only the sub-run’s final answer: the parent’s model, later runs and the messages endpoint never see its work', async () => {
    const task = 'Run the secret command and list the workspace, then report how many messages you saw.';
    model.route(
      sentBy(task),
      {
        toolCalls: [
          { id: 'call_c1', name: 'terminal', arguments: { command: 'echo child-secret-output' } },
          { id: 'call_c2', name: 'list_files', arguments: {} },
        ],
      },
      (req) => ({ content: `CHILD ANSWER after ${req.body.messages.length} messages` }),
    );
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, { content: 'parent done' });
    const { id, session_id } = await runs.start({ input: 'PARENT: find out for me', toolset: 'coding' });
    const parent = await runs.wait(id);
    expect(parent).toMatchObject({ status: 'completed', output: 'parent done', depth: 0, parent_run_id: null });

    // The sub-run started from nothing but its task.
    const childRequests = requestsOf(task);
    expect(childRequests).toHaveLength(2);
    expect(childRequests[0].body.messages).toEqual([{ role: 'user', content: task }]);

    // The parent's next turn holds the answer as the call's result, and nothing else of the sub-run.
    const parentRequests = requestsOf('PARENT: find out for me');
    expect(parentRequests).toHaveLength(2);
    const next = parentRequests[1].body.messages;
    expect(next.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(next[2]).toMatchObject({ tool_call_id: 'call_d', content: 'CHILD ANSWER after 4 messages' });
    expect(JSON.stringify(next)).not.toMatch(/child-secret-output|call_c1|call_c2|list_files/);

    // The sub-run is a run of its own, with its calls, events and usage.
    const [sub] = await subRunsOf(id);
    expect(sub).toMatchObject({
      parent_run_id: id,
      parent_tool_call_id: 'call_d',
      depth: 1,
      session_id,
      status: 'completed',
      output: 'CHILD ANSWER after 4 messages',
    });
    expect(sub.usage).toMatchObject({ model_calls: 2, tool_calls: 2, input_tokens: 20, output_tokens: 10 });
    expect(parent.usage).toMatchObject({ model_calls: 2, tool_calls: 1 });
    expect((await runs.toolCallRows(sub.id)).map((r) => [r.call_id, r.name, r.status])).toEqual([
      ['call_c1', 'terminal', 'completed'],
      ['call_c2', 'list_files', 'completed'],
    ]);
    const subEvents = await readRunEvents(stack.url, runs.key, sub.id);
    expect(subEvents[0]).toMatchObject({ event: 'run.queued', data: { parent_run_id: id, parent_tool_call_id: 'call_d' } });
    expect(subEvents.filter((e) => e.event === 'tool_call.completed').map((e) => e.data.tool_call_id)).toEqual(expect.arrayContaining(['call_c1', 'call_c2']));
    expect(subEvents[subEvents.length - 1].event).toBe('run.completed');

    // The parent's stream points at the sub-run.
    const parentEvents = await readRunEvents(stack.url, runs.key, id);
    expect(parentEvents.find((e) => e.event === 'subrun.started')?.data).toMatchObject({ tool_call_id: 'call_d', subrun_id: sub.id, depth: 1 });
    const delegated = parentEvents.find((e) => e.event === 'tool_call.completed' && e.data.tool_call_id === 'call_d')!;
    expect(delegated.data).toMatchObject({ status: 'completed', output: 'CHILD ANSWER after 4 messages', metadata: { subrun_id: sub.id, status: 'completed' } });
    expect(parentEvents.some((e) => JSON.stringify(e.data).includes('child-secret-output'))).toBe(false);

    // The session's messages leave the sub-run out unless asked for.
    const shown = await runs.messages(session_id);
    expect(shown.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(JSON.stringify(shown)).not.toContain('child-secret-output');
    const all = (await stack.request('GET', `/v1/sessions/${session_id}/messages?include_children=true`, { key: runs.key })).body.data as Array<Record<string, any>>;
    expect(all.filter((m) => m.run_id === sub.id).map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    expect(JSON.stringify(all)).toContain('child-secret-output');
    expect((await stack.request('GET', `/v1/sessions/${session_id}/messages?include_children=maybe`, { key: runs.key })).status).toBe(400);

    // A later run in the session reads the parent's conversation without the sub-run's.
    model.enqueue({ content: 'later' });
    const later = await runs.start({ session_id, input: 'and later?' });
    await runs.wait(later.id);
    const laterMessages = requestsOf('PARENT: find out for me').pop()!.body.messages;
    expect(laterMessages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(JSON.stringify(laterMessages)).not.toContain('child-secret-output');
  });

  it('gives a sub-run at most its parent’s tools, narrowed by toolset and tools; a call to anything else is refused', async () => {
    const wide = 'WIDE: ask for everything, then try the terminal.';
    const narrow = 'NARROW: use the minimal toolset.';
    model.route(sentBy(wide), { toolCalls: [{ id: 'call_w1', name: 'terminal', arguments: { command: 'touch escaped.txt' } }] }, (req) => ({
      content: req.body.messages.find((m) => m.tool_call_id === 'call_w1')?.content ?? 'no result',
    }));
    model.route(sentBy(narrow), { content: 'narrow ok' });
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_wide', name: 'delegate_task', arguments: { task: wide, toolset: 'coding', tools: ['*'] } },
          { id: 'call_narrow', name: 'delegate_task', arguments: { task: narrow, toolset: 'minimal' } },
        ],
      },
      { content: 'done' },
    );
    const { id, session_id } = await runs.start({
      input: 'PARENT: two helpers',
      system: 'Tools:\n{{tools}}',
      toolset: 'coding',
      tools: ['read_file', 'list_files', 'grep', 'delegate_task'],
    });
    expect((await runs.wait(id)).status).toBe('completed');

    // The parent's system text comes along, its {{tools}} listing the sub-run's own tools.
    const narrowSystem = requestsOf(narrow)[0].body.messages[0];
    expect(narrowSystem.role).toBe('system');
    expect(narrowSystem.content?.split('\n').map((l) => l.split(':')[0])).toEqual(['Tools', '- grep', '- list_files', '- read_file']);

    expect(ScriptedModelServer.offeredTools(requestsOf(wide)[0])).toEqual(['delegate_task', 'grep', 'list_files', 'read_file']);
    expect(ScriptedModelServer.offeredTools(requestsOf(narrow)[0])).toEqual(['grep', 'list_files', 'read_file']);
    const refusal = await runs.toolResult(session_id, 'call_wide');
    expect(refusal).toBe('refused: tool terminal is not available in this run, so nothing ran. The tools you can call are: delegate_task, grep, list_files, read_file.');
    expect(await runs.toolResult(session_id, 'call_narrow')).toBe('narrow ok');
    const wideRun = (await subRunsOf(id)).find((r) => r.parent_tool_call_id === 'call_wide')!;
    expect((await runs.toolCallRows(wideRun.id)).map((r) => [r.call_id, r.status])).toEqual([['call_w1', 'refused']]);
    expect((await runs.tool(session_id, 'list_files', {})).output).not.toContain('escaped.txt');
  });

  it('nests sub-runs up to RUNBOX_DELEGATE_MAX_DEPTH (2) and refuses delegation beyond it with a clear result', async () => {
    const child = 'CHILD: ask a helper of your own.';
    const grandchild = 'GRANDCHILD: try to delegate again.';
    model.route(sentBy(child), { toolCalls: [{ id: 'call_g', name: 'delegate_task', arguments: { task: grandchild } }] }, (req) => ({
      content: `child got: ${req.body.messages.find((m) => m.tool_call_id === 'call_g')?.content}`,
    }));
    model.route(sentBy(grandchild), { toolCalls: [{ id: 'call_deeper', name: 'delegate_task', arguments: { task: 'too deep' } }] }, (req) => ({
      content: req.body.messages.find((m) => m.tool_call_id === 'call_deeper')?.content ?? 'no result',
    }));
    model.enqueue({ toolCalls: [{ id: 'call_c', name: 'delegate_task', arguments: { task: child } }] }, { content: 'parent done' });
    const { id, session_id } = await runs.start({ input: 'PARENT: go deep', toolset: 'coding' });
    expect((await runs.wait(id)).status).toBe('completed');

    expect(ScriptedModelServer.offeredTools(requestsOf(child)[0])).toContain('delegate_task');
    expect(ScriptedModelServer.offeredTools(requestsOf(grandchild)[0])).not.toContain('delegate_task');
    expect(requestsOf('too deep')).toHaveLength(0);
    const answer = await runs.toolResult(session_id, 'call_c');
    expect(answer).toMatch(
      /^child got: refused: tool delegate_task is not available here: this run is a sub-run 2 levels deep and sub-runs may nest at most 2 deep \(RUNBOX_DELEGATE_MAX_DEPTH\), so it cannot delegate further: do this task yourself, so nothing ran\./,
    );
    const [childRun] = await subRunsOf(id);
    const [grandchildRun] = await subRunsOf(childRun.id);
    expect(childRun.depth).toBe(1);
    expect(grandchildRun).toMatchObject({ depth: 2, parent_run_id: childRun.id, parent_tool_call_id: 'call_g', status: 'completed' });
    expect(await runs.toolCallRows(grandchildRun.id)).toEqual([expect.objectContaining({ call_id: 'call_deeper', status: 'refused', decision: 'not_offered' })]);
    expect((await runs.messages(session_id)).map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
  });

  it('prompt mode: the sub-run asks for its mutating calls, the parent shows it waits, and either run’s approvals endpoint decides', async () => {
    const task = 'APPROVALS: write two files, one after the other.';
    model.route(
      sentBy(task),
      { toolCalls: [{ id: 'call_a1', name: 'write_file', arguments: { path: 'a.txt', content: 'A' } }] },
      { toolCalls: [{ id: 'call_a2', name: 'write_file', arguments: { path: 'b.txt', content: 'B' } }] },
      { content: 'wrote both' },
    );
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, (req) => ({
      content: `parent saw: ${req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content}`,
    }));
    const { id, session_id } = await runs.start({ input: 'PARENT: needs approvals', toolset: 'coding', approval_mode: 'prompt' });

    // A client following only the parent sees the sub-run's call waiting.
    const untilWaiting = await readRunEvents(stack.url, runs.key, id, { until: (e) => e.event === 'run.requires_approval' });
    const subRunId = untilWaiting.find((e) => e.event === 'subrun.started')!.data.subrun_id;
    expect(untilWaiting.find((e) => e.event === 'subrun.approval_required')?.data).toMatchObject({
      subrun_id: subRunId,
      tool_call_id: 'call_a1',
      name: 'write_file',
      arguments: { path: 'a.txt', content: 'A' },
    });
    expect(untilWaiting[untilWaiting.length - 1].data).toMatchObject({ tool_call_ids: ['call_a1'], subrun_id: subRunId });
    const waitingParent = (await runs.get(id)).body;
    expect(waitingParent.status).toBe('requires_approval');
    expect(waitingParent.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_a1', run_id: subRunId, name: 'write_file' })]);
    const waitingSub = (await runs.get(subRunId)).body;
    expect(waitingSub).toMatchObject({ status: 'requires_approval', pending_approvals: [expect.objectContaining({ tool_call_id: 'call_a1', run_id: subRunId })] });
    const subEvents = await readRunEvents(stack.url, runs.key, subRunId, { until: (e) => e.event === 'run.requires_approval' });
    expect(subEvents.some((e) => e.event === 'tool_call.approval_required' && e.data.tool_call_id === 'call_a1')).toBe(true);
    // The delegation itself did not need approval: it does not mutate.
    expect((await runs.toolCallRows(id))[0]).toMatchObject({ call_id: 'call_d', status: 'running', decision: 'read_only' });

    // Decided on the sub-run's own endpoint ...
    const first = await runs.decide(subRunId, { tool_call_id: 'call_a1', decision: 'approve' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ id: subRunId, tool_call_run_id: subRunId });
    // ... and the next one on the parent's, which finds it in the sub-run.
    await eventually('the second call to wait', async () => {
      const body = (await runs.get(id)).body;
      return body.pending_approvals?.some((p: { tool_call_id: string }) => p.tool_call_id === 'call_a2') ? body : undefined;
    });
    const second = await runs.decide(id, { tool_call_id: 'call_a2', decision: 'approve' });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ id, tool_call_run_id: subRunId, decision: 'approve' });
    expect((await runs.decide(id, { tool_call_id: 'call_nope', decision: 'approve' })).status).toBe(404);

    expect(await runs.wait(id)).toMatchObject({ status: 'completed', output: 'parent saw: wrote both' });
    expect((await runs.get(subRunId)).body).toMatchObject({ status: 'completed', output: 'wrote both' });
    expect((await runs.toolCallRows(subRunId)).map((r) => [r.call_id, r.status, r.decision])).toEqual([
      ['call_a1', 'completed', 'approved'],
      ['call_a2', 'completed', 'approved'],
    ]);
    expect((await runs.tool(session_id, 'read_file', { path: 'b.txt' })).output).toContain('B');
    const events = await readRunEvents(stack.url, runs.key, id);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    // Back to running after the decisions (once or twice: the sub-run may ask again before the parent looks).
    const resumed = events.filter((e) => e.event === 'run.resumed');
    expect(resumed.length).toBeGreaterThanOrEqual(1);
    for (const e of resumed) expect(e.data).toMatchObject({ reason: 'approval', subrun_id: subRunId });
    const types = events.map((e) => e.event);
    expect(types.lastIndexOf('run.resumed')).toBeGreaterThan(types.lastIndexOf('run.requires_approval'));
  });

  it('a call waiting two levels down holds every run above it, and the top run’s endpoint decides it', async () => {
    const child = 'NESTED-CHILD: delegate the writing.';
    const grandchild = 'NESTED-GRANDCHILD: write the file.';
    model.route(sentBy(child), { toolCalls: [{ id: 'call_g', name: 'delegate_task', arguments: { task: grandchild } }] }, { content: 'child done' });
    model.route(sentBy(grandchild), { toolCalls: [{ id: 'call_deep', name: 'write_file', arguments: { path: 'deep.txt', content: 'deep' } }] }, { content: 'grandchild done' });
    model.enqueue({ toolCalls: [{ id: 'call_c', name: 'delegate_task', arguments: { task: child } }] }, { content: 'top done' });
    const { id, session_id } = await runs.start({ input: 'PARENT: nested approval', toolset: 'coding', approval_mode: 'prompt' });
    const pending = await eventually('the top run to show the deep call', async () => {
      const body = (await runs.get(id)).body;
      return body.status === 'requires_approval' && body.pending_approvals.length > 0 ? body.pending_approvals : undefined;
    });
    const [childRun] = await subRunsOf(id);
    const [grandchildRun] = await subRunsOf(childRun.id);
    expect(pending).toEqual([expect.objectContaining({ tool_call_id: 'call_deep', run_id: grandchildRun.id })]);
    expect((await runs.get(childRun.id)).body.status).toBe('requires_approval');
    const held = await readRunEvents(stack.url, runs.key, id, { until: (e) => e.event === 'run.requires_approval' });
    expect(held[held.length - 1].data).toMatchObject({ tool_call_ids: ['call_deep'], subrun_id: childRun.id });
    expect(held.find((e) => e.event === 'subrun.approval_required')?.data).toMatchObject({ subrun_id: grandchildRun.id, tool_call_id: 'call_deep' });

    const decided = await runs.decide(id, { tool_call_id: 'call_deep', decision: 'approve' });
    expect(decided.body).toMatchObject({ id, tool_call_run_id: grandchildRun.id });
    expect((await runs.wait(id)).output).toBe('top done');
    expect((await runs.get(childRun.id)).body).toMatchObject({ status: 'completed', output: 'child done' });
    expect((await runs.tool(session_id, 'read_file', { path: 'deep.txt' })).output).toContain('deep');
  });

  it('two sub-runs waiting at once: the parent lists both, a call id both use must be decided on its own sub-run', async () => {
    const first = 'TWIN-1: write your file.';
    const second = 'TWIN-2: write your file.';
    for (const [task, path] of [
      [first, 'one.txt'],
      [second, 'two.txt'],
    ]) {
      model.route(sentBy(task), { toolCalls: [{ id: 'call_w', name: 'write_file', arguments: { path, content: path } }] }, { content: `${path} written` });
    }
    model.enqueue(
      {
        toolCalls: [
          { id: 'call_d1', name: 'delegate_task', arguments: { task: first } },
          { id: 'call_d2', name: 'delegate_task', arguments: { task: second } },
        ],
      },
      (req) => ({ content: req.body.messages.filter((m) => m.role === 'tool').map((m) => m.content).sort().join(' + ') }),
    );
    const { id } = await runs.start({ input: 'PARENT: twins', toolset: 'coding', approval_mode: 'prompt' });
    const pending = await eventually('both sub-runs to wait', async () => {
      const body = (await runs.get(id)).body;
      return body.status === 'requires_approval' && body.pending_approvals.length === 2 ? (body.pending_approvals as Array<{ tool_call_id: string; run_id: string }>) : undefined;
    });
    const subRunIds = (await subRunsOf(id)).map((r) => r.id as string);
    expect(pending.map((p) => p.run_id).sort()).toEqual([...subRunIds].sort());
    expect(pending.map((p) => p.tool_call_id)).toEqual(['call_w', 'call_w']);
    // A client following only the parent is told of both.
    const seen = new Set<string>();
    const events = await readRunEvents(stack.url, runs.key, id, {
      until: (e) => {
        if (e.event === 'subrun.approval_required') seen.add(e.data.subrun_id);
        return seen.size === 2;
      },
    });
    expect(events.filter((e) => e.event === 'run.requires_approval')).toHaveLength(1);

    const ambiguous = await runs.decide(id, { tool_call_id: 'call_w', decision: 'approve' });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error).toMatchObject({ code: 'conflict', details: { run_ids: expect.arrayContaining(subRunIds) } });
    for (const subRunId of subRunIds) expect((await runs.decide(subRunId, { tool_call_id: 'call_w', decision: 'approve' })).status).toBe(200);
    expect((await runs.wait(id)).output).toBe('one.txt written + two.txt written');
  });

  it('holds a sub-run to its parent’s guardrails and permission rules, counted in the sub-run', async () => {
    const task = 'GUARDED: run three commands.';
    const echo = (n: number) => ({ id: `call_e${n}`, name: 'terminal', arguments: { command: `echo guarded-${n} >> /workspace/guarded.txt` } });
    model.route(
      sentBy(task),
      { toolCalls: [{ id: 'call_rm', name: 'terminal', arguments: { command: 'rm -rf /workspace/keep' } }, echo(1), echo(2), echo(3)] },
      { content: 'helper stopped as told' },
    );
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, { content: 'parent done' });
    const { id, session_id } = await runs.start({
      input: 'PARENT: guarded helper',
      toolset: 'coding',
      limits: { warn_after: 2, hard_stop_after: 3 },
      permissions: { deny: ['terminal(rm *)'] },
    });
    expect(await runs.wait(id)).toMatchObject({ status: 'completed', output: 'parent done' });
    expect(await runs.toolResult(session_id, 'call_d')).toBe('helper stopped as told');

    const [sub] = await subRunsOf(id);
    const rows = await runs.toolCallRows(sub.id);
    const byId = Object.fromEntries(rows.map((r) => [r.call_id, r]));
    // The deny rule refuses the first call; it still counts, so the third echo is past the stop.
    expect(byId.call_rm).toMatchObject({ status: 'refused', decision: 'rule_deny' });
    expect([byId.call_e1.status, byId.call_e2.status]).toEqual(['completed', 'completed']);
    expect(byId.call_e3).toMatchObject({ status: 'refused', decision: 'hard_stop' });
    const written = await runs.tool(session_id, 'read_file', { path: 'guarded.txt' });
    expect(written.output.match(/guarded-\d/g)).toHaveLength(2);
    const subEvents = await readRunEvents(stack.url, runs.key, sub.id);
    // The echoes run concurrently, so the two notes may arrive in either order.
    expect(subEvents.filter((e) => e.event === 'guardrail.warning').map((e) => e.data.kind).sort()).toEqual(['hard_stop', 'warning']);
    // The parent made one call of its own: the sub-run's calls did not count toward its limits.
    expect((await runs.get(id)).body.usage.tool_calls).toBe(1);
  });

  it('does not count sub-runs against the tenant’s run quotas; their parent already counts', async () => {
    const limited = new RunsClient(stack, (await stack.createTenant(undefined, { runs_per_minute: 2 })).apiKey);
    const task = 'QUOTA: answer at once.';
    model.route(sentBy(task), { content: 'quick' });
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, { content: 'first done' }, { content: 'second done' });
    const first = await limited.start({ input: 'PARENT: quota one', toolset: 'coding' });
    expect((await limited.wait(first.id)).output).toBe('first done');
    const second = await limited.create({ input: 'PARENT: quota two' });
    expect(second.status).toBe(202);
    expect((await limited.wait(second.body.id)).output).toBe('second done');
    const third = await limited.create({ input: 'PARENT: quota three' });
    expect(third.status).toBe(429);
  });

  it('cancelling the parent cancels its sub-run and stops the sub-run’s command in the sandbox', async () => {
    const task = 'CANCEL: sleep for a long time.';
    model.route(sentBy(task), { toolCalls: [{ id: 'call_sleep', name: 'terminal', arguments: { command: 'sleep 97' } }] }, { content: 'never' });
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, { content: 'never either' });
    const { id, session_id } = await runs.start({ input: 'PARENT: will be cancelled', toolset: 'coding' });
    const subRunId = await eventually('the sub-run’s command to run', async () => {
      const [sub] = await subRunsOf(id);
      if (!sub) return undefined;
      const rows = await runs.toolCallRows(sub.id);
      return rows[0]?.status === 'running' ? (sub.id as string) : undefined;
    });

    const cancelled = await runs.cancel(id);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    // Already cancelled when the parent's cancel answered.
    expect((await runs.get(subRunId)).body.status).toBe('cancelled');
    expect(await runs.toolCallRows(subRunId)).toEqual([expect.objectContaining({ call_id: 'call_sleep', status: 'cancelled' })]);
    expect((await runs.toolCallRows(id))[0]).toMatchObject({ call_id: 'call_d', status: 'cancelled' });
    await eventually('the sleep to stop in the sandbox', async () => {
      const ps = await runs.tool(session_id, 'terminal', { command: 'ps -eo args' });
      return ps.output.includes('sleep 97') ? undefined : true;
    });
    const subEvents = await readRunEvents(stack.url, runs.key, subRunId);
    expect(subEvents[subEvents.length - 1].event).toBe('run.cancelled');
    expect(requestsOf(task)).toHaveLength(1);
  });

  it('a sub-run cancelled on its own becomes a cancelled result, and the parent goes on', async () => {
    const task = 'CANCEL-CHILD: wait to be cancelled.';
    model.route(sentBy(task), { toolCalls: [{ id: 'call_wait', name: 'terminal', arguments: { command: 'sleep 98' } }] });
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, (req) => ({
      content: `parent saw: ${req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content}`,
    }));
    const { id } = await runs.start({ input: 'PARENT: helper will be cancelled', toolset: 'coding' });
    const subRunId = await eventually('the sub-run’s command to run', async () => {
      const [sub] = await subRunsOf(id);
      return sub && (await runs.toolCallRows(sub.id))[0]?.status === 'running' ? (sub.id as string) : undefined;
    });
    expect((await runs.cancel(subRunId)).status).toBe(200);
    const parent = await runs.wait(id);
    expect(parent).toMatchObject({ status: 'completed', output: `parent saw: cancelled: the sub-agent's run ${subRunId} was cancelled before it answered.` });
    expect((await runs.toolCallRows(id))[0]).toMatchObject({ call_id: 'call_d', status: 'failed' });
  });

  it('refuses bad delegate_task arguments, and does nothing when called outside a run', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_bad', name: 'delegate_task', arguments: { task: '   ', toolset: 'everything' } }] }, { content: 'ok' });
    const { id, session_id } = await runs.start({ input: 'PARENT: bad arguments', toolset: 'coding' });
    await runs.wait(id);
    const refusal = await runs.toolResult(session_id, 'call_bad');
    expect(refusal).toMatch(/^refused: invalid arguments for delegate_task: arguments\.task: must not be empty; arguments\.toolset: /);
    expect(await subRunsOf(id)).toEqual([]);

    const direct = await runs.tool(session_id, 'delegate_task', { task: 'do it' });
    expect(direct).toMatchObject({ is_error: true, output: expect.stringContaining('only works inside one') });
    expect((await stack.request('GET', `/v1/runs?session_id=${session_id}`, { key: runs.key })).body.data).toHaveLength(1);
  });
});
