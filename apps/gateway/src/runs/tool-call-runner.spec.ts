import { MetricsService } from '../metrics/metrics.service';
import type { NatsClient } from '@app/messaging';
import { ToolRouter } from '../tools/tool-router';
import { ToolRegistry } from '../tools/tool-registry';
import { RunAbort } from './run-abort';
import { RunContext } from './run-context';
import { RunEventsService } from './run-events.service';
import { effectiveLimits, RunOptions } from './run-options';
import { FakeExecutor, InMemoryRuns, silentLogger, testConfig } from './testing/in-memory-runs';
import { callOrderingKey, ToolCallRunner } from './tool-call-runner';

/** Which of one turn's calls must wait for each other: those on the same file, and no others. */
describe('callOrderingKey', () => {
  let n = 0;
  const fileCall = (path: unknown) => callOrderingKey({ callId: `call_${++n}`, arguments: { path, content: 'x' } }, 'path');
  const terminalCall = () => callOrderingKey({ callId: `call_${++n}`, arguments: { command: 'ls a' } }, undefined);

  it('puts the spellings of one file in one group', () => {
    expect(new Set([fileCall('./a'), fileCall('/workspace/a'), fileCall('a')]).size).toBe(1);
    expect(fileCall('a//b')).toBe(fileCall('a/b'));
    expect(fileCall('x/../a/./b')).toBe(fileCall('a/b'));
  });

  it('keeps different files apart', () => {
    expect(fileCall('b.txt')).not.toBe(fileCall('a'));
    expect(fileCall('a/b')).not.toBe(fileCall('a'));
    // Only the workspace prefix is dropped, not a folder that merely starts like it.
    expect(fileCall('/workspace2/a')).not.toBe(fileCall('a'));
  });

  it('gives a call without a path a group of its own', () => {
    expect(terminalCall()).not.toBe(terminalCall());
    expect(terminalCall()).not.toBe(fileCall('a'));
    // A path argument that is missing or not a string names no file either.
    expect(fileCall(undefined)).not.toBe(fileCall(undefined));
    expect(callOrderingKey({ callId: 'call_raw', arguments: { _raw: '{"path": "a"' } }, 'path')).toBe('call:call_raw');
  });
});

/**
 * One pass over a turn with the real router and registry over the run tables in memory;
 * the executor answers at once unless the test holds a call.
 */
describe('ToolCallRunner.pass', () => {
  function setUp(options: RunOptions = {}) {
    const store = new InMemoryRuns();
    const config = testConfig();
    const registry = new ToolRegistry();
    const executor = new FakeExecutor();
    const events = new RunEventsService(store.eventsRepository(), { publish: () => undefined } as unknown as NatsClient);
    const toolCalls = store.toolCallsRepository();
    const runner = new ToolCallRunner(toolCalls, events, registry, new ToolRouter(registry, executor.asClient()), executor.asClient(), config, new MetricsService(config));
    const run = store.addRun({ status: 'running', options });
    const ctx: RunContext = {
      run: store.view(run.id),
      signal: new AbortController().signal,
      offered: new Set(registry.toolset('default')),
      withheld: new Map(),
      tenantTools: new Map(),
      reportedProblems: new Set(),
      limits: effectiveLimits(options),
      executorId: null,
      usage: { input_tokens: 0, output_tokens: 0, model_calls: 1, tool_calls: 0 },
      log: silentLogger,
    };
    /** Stores one model turn of pending calls and returns it as the run loop would read it. */
    const turn = (...calls: Array<[string, Record<string, unknown>]>) => {
      calls.forEach(([name, args], i) =>
        store.calls.push({ runId: run.id, callId: `call_${i + 1}`, seq: i + 1, turn: 1, name, arguments: args, status: 'pending', output: null, isError: false, decision: null, reason: null, expiresAt: null }),
      );
      return store.callsOf(run.id);
    };
    return { store, executor, runner, ctx, run, turn, toolCalls };
  }

  it('holds back the later calls on a file whose call awaits approval, and only those', async () => {
    const { store, executor, runner, ctx, run, turn } = setUp({ approval_mode: 'prompt' });
    const calls = turn(['write_file', { path: 'a.txt', content: 'x' }], ['read_file', { path: 'a.txt' }], ['read_file', { path: 'b.txt' }]);

    expect(await runner.pass(ctx, calls)).toBe('awaiting');

    expect(store.callsOf(run.id).map((c) => c.status)).toEqual(['awaiting_approval', 'pending', 'completed']);
    expect(executor.log).toEqual(['start read_file:b.txt', 'end read_file:b.txt']);
    expect(store.eventTypes(run.id)).toContain('tool_call.approval_required');
  });

  it('answers a denied call with the refusal and its reason, running nothing', async () => {
    const { store, executor, runner, ctx, run, turn } = setUp();
    const [call] = turn(['write_file', { path: 'a.txt', content: 'x' }]);
    Object.assign(store.calls[0], { status: 'denied', reason: 'not that file' });

    expect(await runner.pass(ctx, [{ ...call, status: 'denied', reason: 'not that file' }])).toBe('progress');

    expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'refused', output: 'denied: the approver refused this call (reason: not that file), so nothing ran.' });
    expect(executor.log).toEqual([]);
  });

  describe('while the database is away', () => {
    const outage = () => new Error('connect ECONNREFUSED 127.0.0.1:5432');

    it('sends again a call that could not leave (the executor could not reach its database): nothing ran, so it runs once', async () => {
      const { store, executor, runner, ctx, run, turn } = setUp();
      const answer = executor.callTool;
      let refusals = 2;
      executor.callTool = async (request) =>
        refusals-- > 0 ? { ok: false, executor_id: 'exec-1', error: { code: 'unavailable', message: 'the executor cannot reach the database right now' } } : answer(request);
      const calls = turn(['terminal', { command: 'make' }]);

      expect(await runner.pass(ctx, calls)).toBe('progress');
      expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'completed', output: 'terminal:make done' });
      expect(executor.log).toEqual(['start terminal:make', 'end terminal:make']);
    });

    it('keeps the result of a call that finished meanwhile and stores it once the database answers, after renewing the claim', async () => {
      const { store, runner, ctx, run, turn, toolCalls } = setUp();
      const finish = toolCalls.finish.bind(toolCalls);
      let failures = 3;
      toolCalls.finish = (...args: Parameters<typeof finish>) => (failures-- > 0 ? Promise.reject(outage()) : finish(...args));
      const holdClaim = jest.fn(async () => true);
      const calls = turn(['terminal', { command: 'make' }]);

      expect(await runner.pass({ ...ctx, holdClaim }, calls)).toBe('progress');
      expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'completed', output: 'terminal:make done' });
      expect(holdClaim).toHaveBeenCalledTimes(3);
    });

    it('stores nothing once another worker has taken the run over', async () => {
      const { store, runner, ctx, run, turn, toolCalls } = setUp();
      const finish = toolCalls.finish.bind(toolCalls);
      let failures = 1;
      toolCalls.finish = (...args: Parameters<typeof finish>) => (failures-- > 0 ? Promise.reject(outage()) : finish(...args));
      const controller = new AbortController();
      const holdClaim = async () => {
        controller.abort(new RunAbort('lease_lost'));
        return false;
      };
      const calls = turn(['terminal', { command: 'make' }]);

      await expect(runner.pass({ ...ctx, signal: controller.signal, holdClaim }, calls)).rejects.toEqual(new RunAbort('lease_lost'));
      expect(store.callsOf(run.id)[0].status).toBe('running');
    });
  });

  describe('a call that never answers', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it("is given up after the limit the tool was given, plus a margin, the sandbox's start and the executor's grace", async () => {
      // limits.timeouts caps the terminal at 10 s: the watchdog waits 10 s + 5 s, 180 s for a
      // sandbox to start and 15 s of grace.
      const { store, executor, runner, ctx, run, turn } = setUp({ limits: { timeouts: { terminal: 10 } } });
      executor.hold('terminal:make');
      const calls = turn(['terminal', { command: 'make', timeout_seconds: 600 }]);

      const pass = runner.pass(ctx, calls);
      await executor.whenStarted('terminal:make');
      await jest.advanceTimersByTimeAsync(210_000 - 1);
      expect(store.callsOf(run.id)[0].status).toBe('running');

      await jest.advanceTimersByTimeAsync(1);
      expect(await pass).toBe('progress');
      expect(store.callsOf(run.id)[0]).toMatchObject({ status: 'failed', isError: true });
      expect(store.callsOf(run.id)[0].output).toContain('gave no result within its time limit');
    });
  });
});
