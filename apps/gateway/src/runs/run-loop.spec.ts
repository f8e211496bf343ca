import type { NatsClient } from '@app/messaging';
import { mcpTenantTool } from '../mcp/mcp-tool';
import { MetricsService } from '../metrics/metrics.service';
import type { SessionsRepository } from '../sessions/sessions.repository';
import type { TenantTool } from '../tools/tenant-tool';
import type { TenantTools } from '../tools/tenant-tools';
import { ToolRouter } from '../tools/tool-router';
import { ToolRegistry } from '../tools/tool-registry';
import type { RunControlService } from './run-control.service';
import type { RunEnqueuer } from './run-enqueuer';
import { RunEventsService } from './run-events.service';
import { MAX_RECOVERIES, RunLoop } from './run-loop';
import { RunOptions } from './run-options';
import { RunDefaultsRepository } from './run-defaults.repository';
import { RunToolSelection } from './run-tools';
import { FakeExecutor, InMemoryRuns, ScriptedModel, silentLogger, testConfig } from './testing/in-memory-runs';
import { INTERRUPTED_RESULT, ToolCallRunner } from './tool-call-runner';

type Script = ConstructorParameters<typeof ScriptedModel>[0];

/**
 * The agent loop with the real ToolCallRunner, ToolRouter and ToolRegistry over the run
 * tables in memory: only the model (scripted), the executor (answers at once unless a call
 * is held) and NATS (announcements dropped) are fakes.
 */
function setUp(script: Script, options: RunOptions = {}, env: { tenantTools?: TenantTools; sandboxExecutor?: () => string | null } = {}) {
  const store = new InMemoryRuns();
  const config = testConfig();
  const registry = new ToolRegistry();
  const executor = new FakeExecutor();
  const nats = { publish: () => undefined } as unknown as NatsClient;
  const events = new RunEventsService(store.eventsRepository(), nats);
  const toolCalls = store.toolCallsRepository();
  const runner = new ToolCallRunner(toolCalls, events, registry, new ToolRouter(registry, executor.asClient()), executor.asClient(), config, new MetricsService(config));
  const startedNext: string[] = [];
  const enqueuer = {
    startNextInSession: async (_tenantId: string, sessionId: string) => void startedNext.push(sessionId),
    enqueue: async (_tenantId: string, runId: string) => void startedNext.push(store.run(runId).sessionId),
  } as unknown as RunEnqueuer;
  const control = { cancelSubRuns: async () => undefined } as unknown as RunControlService;
  const sandboxExecutor = env.sandboxExecutor ?? (() => null);
  const sessions = {
    find: async () => ({ executorId: sandboxExecutor() }),
    toolRoute: async () => ({ executorId: sandboxExecutor() }),
  } as unknown as SessionsRepository;
  const model = new ScriptedModel(script);
  const loop = new RunLoop(
    store.runsRepository(),
    store.messagesRepository(),
    toolCalls,
    sessions,
    events,
    registry,
    runner,
    enqueuer,
    control,
    new RunToolSelection(registry, config, env.tenantTools),
    { approvalRequired: async () => new Set<string>() } as unknown as RunDefaultsRepository,
    model,
    config,
    silentLogger,
    new MetricsService(config),
  );
  const run = store.addRun({ options });
  const execute = (recovery: { recovered?: boolean; recoveries?: number } = {}) => loop.execute(store.view(run.id), new AbortController().signal, recovery);
  return { store, executor, model, run, execute, startedNext };
}

describe('RunLoop', () => {
  it("runs the turn's tool calls, gives the results to the model and completes with its answer", async () => {
    const { store, executor, model, run, execute, startedNext } = setUp([[['read_file', { path: 'a.txt' }]], 'a.txt says hello']);
    store.addRun({ sessionId: run.sessionId, input: 'the next task' });

    expect(await execute()).toBe('finished');

    expect(store.run(run.id)).toMatchObject({ status: 'completed', output: 'a.txt says hello' });
    expect(store.callsOf(run.id).map((c) => c.status)).toEqual(['completed']);
    expect(executor.log).toEqual(['start read_file:a.txt', 'end read_file:a.txt']);
    expect(model.requests[1].messages.at(-1)).toEqual({ role: 'tool', toolCallId: 'call_1', content: 'read_file:a.txt done' });
    expect(store.eventTypes(run.id)).toEqual([
      'run.started',
      'message.created',
      'message.created',
      'tool_call.started',
      'tool_call.completed',
      'message.created',
      'run.completed',
    ]);
    expect(store.run(run.id).usage).toMatchObject({ model_calls: 2, tool_calls: 1, input_tokens: 20, output_tokens: 10 });
    // The session is free again: the next run queued on it may start.
    expect(startedNext).toEqual(['ses_1']);
  });

  it('starts a run and completes it with an answer that needs no tool in two writes, reading back nothing it wrote', async () => {
    const { store, model, run, execute, startedNext } = setUp(['nothing to do']);
    const next = store.addRun({ sessionId: run.sessionId, input: 'the next task' });

    expect(await execute()).toBe('finished');

    // The start, the history for the model, the answer with the completion: nothing more.
    expect(store.repositoryCalls).toEqual(['start', 'modelContext', 'completeWithAnswer']);
    expect(model.requests).toHaveLength(1);
    expect(store.run(run.id)).toMatchObject({ status: 'completed', output: 'nothing to do', leaseOwner: null });
    expect(store.run(run.id).usage).toMatchObject({ model_calls: 1, tool_calls: 0, input_tokens: 10, output_tokens: 5 });
    expect(store.eventTypes(run.id)).toEqual(['run.started', 'message.created', 'message.created', 'run.completed']);
    expect(store.events.get(run.id)?.[3].data).toMatchObject({ output: 'nothing to do', usage: { model_calls: 1, tool_calls: 0 } });
    expect(store.messages.filter((m) => m.runId === run.id).map((m) => [m.role, m.content])).toEqual([
      ['user', 'do the task'],
      ['assistant', 'nothing to do'],
    ]);
    // The session's run queued behind it is put on the queue.
    expect(store.run(next.id).status).toBe('queued');
    expect(startedNext).toEqual([run.sessionId]);
  });

  it('waits, writing nothing, when an earlier run of the session has not ended', async () => {
    const { store, run, execute, model } = setUp(['never asked']);
    const earlier = store.addRun({ sessionId: run.sessionId, status: 'running', createdAt: new Date(0) });

    expect(await execute()).toBe('waiting');

    expect(store.run(run.id).status).toBe('queued');
    expect(store.eventTypes(run.id)).toEqual([]);
    expect(model.requests).toHaveLength(0);
    expect(store.run(earlier.id).status).toBe('running');
  });

  it('warns at warn_after, stops tools at hard_stop_after and fails a model that keeps calling them', async () => {
    const read = (path: string) => [['read_file', { path }]] as Array<[string, Record<string, unknown>]>;
    const { store, executor, model, run, execute } = setUp([read('a'), read('b'), read('c'), read('d'), read('e')], { limits: { warn_after: 2, hard_stop_after: 3 } });

    expect(await execute()).toBe('finished');

    const calls = store.callsOf(run.id);
    expect(calls.map((c) => [c.seq, c.status, c.decision])).toEqual([
      [1, 'completed', 'read_only'],
      [2, 'completed', 'read_only'],
      [3, 'completed', 'read_only'],
      [4, 'refused', 'hard_stop'],
      [5, 'refused', 'hard_stop'],
    ]);
    expect(calls[1].output).toContain('You have made 2 tool calls');
    expect(calls[2].output).toContain('the last one this run may make (hard_stop_after=3)');
    const warnings = (store.events.get(run.id) ?? []).filter((e) => e.type === 'guardrail.warning').map((e) => e.data.kind);
    expect(warnings).toEqual(['warning', 'hard_stop']);
    // Past the hard stop the model is offered no tools; nothing more reaches the sandbox.
    expect(model.requests.map((r) => r.tools.length > 0)).toEqual([true, true, true, false, false]);
    expect(executor.log.filter((l) => l.startsWith('start'))).toHaveLength(3);
    expect(store.run(run.id).status).toBe('failed');
    expect(store.run(run.id).error).toContain('kept calling tools after the run\'s limit of 3 tool calls');
  });

  it('refuses a call repeated more than repeat_limit times in a row, without running it', async () => {
    const same: Array<[string, Record<string, unknown>]> = [['grep', { pattern: 'TODO' }]];
    const { store, executor, run, execute } = setUp([same, same, same, [['grep', { pattern: 'FIXME' }]], 'done'], { limits: { repeat_limit: 2 } });

    await execute();

    expect(store.callsOf(run.id).map((c) => [c.status, c.decision])).toEqual([
      ['completed', 'read_only'],
      ['completed', 'read_only'],
      ['refused', 'repetition'],
      ['completed', 'read_only'],
    ]);
    expect(executor.log.filter((l) => l.startsWith('start grep:'))).toEqual(['start grep:TODO', 'start grep:TODO', 'start grep:FIXME']);
    expect(store.run(run.id).status).toBe('completed');
  });

  it('runs calls on one file in the order the model made them, and other calls beside them', async () => {
    const turn: Array<[string, Record<string, unknown>]> = [
      ['write_file', { path: 'a.txt', content: 'one' }],
      ['read_file', { path: './a.txt' }],
      ['terminal', { command: 'make' }],
    ];
    const { store, executor, run, execute } = setUp([turn, 'done']);
    executor.hold('write_file:a.txt');

    const finished = execute();
    await executor.whenStarted('write_file:a.txt');
    await executor.whenStarted('terminal:make');
    // The write is still going: the read of the same file (spelled differently) waits for it.
    expect(executor.log).not.toContain('start read_file:./a.txt');

    executor.release('write_file:a.txt');
    expect(await finished).toBe('finished');
    expect(executor.log.indexOf('start read_file:./a.txt')).toBeGreaterThan(executor.log.indexOf('end write_file:a.txt'));
    expect(store.callsOf(run.id).map((c) => c.status)).toEqual(['completed', 'completed', 'completed']);
  });

  it('parks a call that needs approval and goes on from the stored state once it is approved', async () => {
    const { store, executor, run, execute } = setUp([[['write_file', { path: 'a.txt', content: 'x' }]], 'written'], { approval_mode: 'prompt' });

    expect(await execute()).toBe('parked');
    expect(store.run(run.id).status).toBe('requires_approval');
    expect(store.callsOf(run.id)[0].status).toBe('awaiting_approval');
    expect(store.eventTypes(run.id)).toContain('run.requires_approval');
    expect(executor.log).toEqual([]);

    store.callsOf(run.id)[0].status = 'approved';
    expect(await execute()).toBe('finished');

    expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'completed', decision: 'approved' });
    expect(store.eventTypes(run.id)).toContain('run.resumed');
    expect(store.run(run.id)).toMatchObject({ status: 'completed', output: 'written' });
  });

  it('sends sandbox calls to the executor of a sandbox that a tool listing made mid-run', async () => {
    // The stdio MCP server `local`, whose listing (before turn 2) starts it in the sandbox,
    // which makes the session's sandbox on executor exec-2.
    let sandboxOn: string | null = null;
    let listings = 0;
    const ping = mcpTenantTool('local', { name: 'ping', inputSchema: { type: 'object' } }, async () => ({ content: [{ type: 'text', text: 'pong' }] }));
    if (!ping.ok) throw new Error(ping.reason);
    const tenantTools = {
      list: async () => {
        if (++listings === 2) sandboxOn = 'exec-2';
        return { tools: new Map<string, TenantTool>([[ping.tool.definition.name, ping.tool]]), problems: [] };
      },
    } as unknown as TenantTools;
    const { store, executor, run, execute } = setUp([[['mcp__local__ping', {}]], [['read_file', { path: 'a.txt' }]], 'done'], { tools: ['mcp__local', 'read_file'] }, {
      tenantTools,
      sandboxExecutor: () => sandboxOn,
    });

    expect(await execute()).toBe('finished');

    expect(store.run(run.id)).toMatchObject({ status: 'completed', output: 'done' });
    expect(executor.routes).toEqual([{ subject: 'read_file:a.txt', executorId: 'exec-2' }]);
  });

  describe('resuming after its worker was lost', () => {
    /** A run whose worker died while its write_file call was running. */
    function strandedMidCall(script: Script) {
      const setup = setUp(script);
      const { store, run } = setup;
      Object.assign(store.run(run.id), { status: 'running', startedAt: new Date() });
      store.addMessage(run, { role: 'user', content: run.input });
      store.addMessage(run, { role: 'assistant', content: null, toolCalls: [{ id: 'call_w', name: 'write_file', arguments: '{"path":"a.txt","content":"x"}' }] });
      store.calls.push({ runId: run.id, callId: 'call_w', seq: 1, turn: 1, name: 'write_file', arguments: { path: 'a.txt', content: 'x' }, status: 'running', output: null, isError: false, decision: 'auto', reason: null, expiresAt: null });
      return setup;
    }

    it('reports the call it cannot know the outcome of, never runs it again, and goes on', async () => {
      const { store, executor, model, run, execute } = strandedMidCall(['checked, it was written']);

      expect(await execute({ recovered: true, recoveries: 1 })).toBe('finished');

      expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'interrupted', output: INTERRUPTED_RESULT });
      expect(executor.log).toEqual([]);
      expect(store.events.get(run.id)?.[0]).toEqual({ type: 'run.resumed', data: { reason: 'worker_lost', recoveries: 1 } });
      expect(model.requests[0].messages.at(-1)).toEqual({ role: 'tool', toolCallId: 'call_w', content: INTERRUPTED_RESULT });
      expect(store.run(run.id)).toMatchObject({ status: 'completed', output: 'checked, it was written' });
    });

    it(`gives the run up after more than ${MAX_RECOVERIES} lost workers`, async () => {
      const { store, model, run, execute } = strandedMidCall(['never asked']);

      expect(await execute({ recovered: true, recoveries: MAX_RECOVERIES + 1 })).toBe('finished');

      expect(store.run(run.id).status).toBe('failed');
      expect(store.run(run.id).error).toContain(`lost its worker ${MAX_RECOVERIES + 1} times`);
      expect(store.callsOf(run.id)[0].status).toBe('failed');
      expect(model.requests).toEqual([]);
    });
  });
});
