import { ScriptedModelServer } from '@app/testing';
import { eventually, gate, RunsClient } from './support/runs';
import { readRunEvents } from './support/sse';
import { TestStack } from './support/test-stack';

/** Short, so the suite stays quick (the takeover waits about one lease). */
const LEASE_SECONDS = 4;

const sentBy = ScriptedModelServer.sentBy;

/**
 * A gateway crash while a sub-run works: the parent is not lost. The resumed parent finds
 * its delegate_task call's sub-run (one per call, in Postgres), continues it, and gets its
 * answer; the sub-run's own call that was in flight follows the loop's rule (interrupted,
 * never repeated).
 */
describe('delegate_task across a gateway crash', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      gatewayProcess: true,
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_RUN_LEASE_SECONDS: String(LEASE_SECONDS), RUNBOX_RUN_SWEEP_SECONDS: '1' },
    }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  async function restart(): Promise<number> {
    const killedAt = Date.now();
    await stack.killGateway();
    await stack.startGatewayProcess();
    return killedAt;
  }

  async function onlySubRun(parentId: string) {
    const res = await stack.request('GET', `/v1/runs?parent_run_id=${parentId}`, { key: runs.key });
    expect(res.body.data).toHaveLength(1);
    return res.body.data[0] as { id: string; status: string };
  }

  it('a parent killed while its sub-run runs a command resumes, continues the same sub-run, and gets its answer', async () => {
    const task = 'DURABLE: log a line slowly, then answer.';
    model.route(
      sentBy(task),
      { toolCalls: [{ id: 'call_slow', name: 'terminal', arguments: { command: 'echo start >> log.txt; sleep 3; echo end >> log.txt' } }] },
      (req) => ({ content: `child survived: ${req.body.messages.find((m) => m.tool_call_id === 'call_slow')?.content?.slice(0, 12)}` }),
    );
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, (req) => ({
      content: `parent saw: ${req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content}`,
    }));
    const { id, session_id } = await runs.start({ input: 'PARENT: survive a crash', toolset: 'coding' });
    await eventually('the sub-run’s command to start', async () => {
      const log = await runs.tool(session_id, 'terminal', { command: 'cat log.txt 2>/dev/null || true' });
      return log.output.includes('start') ? true : undefined;
    });

    const killedAt = await restart();
    const parent = await runs.wait(id, undefined, 90_000).catch((err: Error) => {
      throw new Error(`${err.message}\ngateway output:\n${stack.gatewayOutput}`);
    });
    const killToAnswerMs = Date.now() - killedAt;
    expect(parent).toMatchObject({ status: 'completed', output: 'parent saw: child survived: interrupted:' });

    // One sub-run, continued rather than started again; its in-flight call was not repeated.
    const sub = await onlySubRun(id);
    expect(sub.status).toBe('completed');
    expect((await runs.toolCallRows(sub.id)).map((r) => [r.call_id, r.status])).toEqual([['call_slow', 'interrupted']]);
    expect((await runs.toolCallRows(id)).map((r) => [r.call_id, r.status])).toEqual([['call_d', 'completed']]);
    expect(model.requests.filter(sentBy(task))).toHaveLength(2);
    const subEvents = await readRunEvents(stack.url, runs.key, sub.id);
    expect(subEvents.find((e) => e.event === 'run.resumed')?.data).toMatchObject({ reason: 'worker_lost' });
    const parentEvents = await readRunEvents(stack.url, runs.key, id);
    expect(parentEvents.filter((e) => e.event === 'subrun.started')).toHaveLength(1);
    expect(parentEvents.filter((e) => e.event === 'tool_call.started')).toHaveLength(1);
    expect(parentEvents.map((e) => e.id)).toEqual(parentEvents.map((_, i) => i + 1));
    const log = await eventually('the interrupted command to finish in the sandbox', async () => {
      const out = (await runs.tool(session_id, 'read_file', { path: 'log.txt' })).output;
      return out.includes('end') ? out : undefined;
    });
    expect(log.split('\n').filter((l) => l === 'start')).toHaveLength(1);
    console.log(`sub-run resumed after a gateway SIGKILL: ${JSON.stringify({ lease_seconds: LEASE_SECONDS, kill_to_parent_completed_ms: killToAnswerMs })}`);
  });

  it('an orderly stop (SIGTERM) lets go of the parent and its sub-run together, so the next gateway continues both without waiting for a lease', async () => {
    const task = 'HANDOVER: answer after the gateway restarts.';
    const hold = gate();
    model.route(
      sentBy(task),
      async () => {
        await hold.wait;
        return { status: 500, body: 'nobody is listening any more' };
      },
      { content: 'child after handover' },
    );
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, (req) => ({
      content: `parent saw: ${req.body.messages.find((m) => m.tool_call_id === 'call_d')?.content}`,
    }));
    const { id } = await runs.start({ input: 'PARENT: orderly stop', toolset: 'coding' });
    await eventually('the sub-run to ask its model', async () => (model.requests.filter(sentBy(task)).length === 1 ? true : undefined));

    await stack.killGateway('SIGTERM');
    hold.open();
    await stack.startGatewayProcess();
    expect(await runs.wait(id, undefined, 90_000)).toMatchObject({ status: 'completed', output: 'parent saw: child after handover' });
    const sub = await onlySubRun(id);
    // Both were handed back, not taken over from a dead worker.
    for (const runId of [id, sub.id]) {
      const events = await readRunEvents(stack.url, runs.key, runId);
      expect(events.find((e) => e.event === 'run.resumed')?.data).toMatchObject({ reason: 'requeued', recoveries: 0 });
    }
  });

  it('a sub-run’s pending approval survives a crash and is decided through the parent on the restarted gateway', async () => {
    const task = 'DURABLE-APPROVAL: write a file once allowed.';
    model.route(sentBy(task), { toolCalls: [{ id: 'call_w', name: 'write_file', arguments: { path: 'allowed.txt', content: 'yes' } }] }, { content: 'written' });
    model.enqueue({ toolCalls: [{ id: 'call_d', name: 'delegate_task', arguments: { task } }] }, { content: 'parent finished' });
    const { id, session_id } = await runs.start({ input: 'PARENT: approval across a crash', toolset: 'coding', approval_mode: 'prompt' });
    await runs.wait(id, ['requires_approval']);

    await restart();
    // The restarted gateway shows the parent waiting for the sub-run's call.
    await eventually('the resumed parent to show the pending call', async () => {
      const body = (await runs.get(id).catch(() => undefined))?.body;
      return body?.status === 'requires_approval' && body.pending_approvals?.some((p: { tool_call_id: string }) => p.tool_call_id === 'call_w') ? true : undefined;
    }, 90_000);
    const decided = await runs.decide(id, { tool_call_id: 'call_w', decision: 'approve' });
    expect(decided.status).toBe(200);
    expect((await runs.wait(id, undefined, 90_000)).output).toBe('parent finished');
    expect((await onlySubRun(id)).status).toBe('completed');
    expect((await runs.tool(session_id, 'read_file', { path: 'allowed.txt' })).output).toContain('yes');
  });
});
