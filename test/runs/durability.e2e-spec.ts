import { INestApplication } from '@nestjs/common';
import { RUN_STREAM } from '@app/contracts';
import { ScriptedModelServer } from '@app/testing';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AddressInfo } from 'node:net';
import { connect } from 'nats';
import { createGateway } from '../../apps/gateway/src/bootstrap';
import { eventually, gate, RunsClient } from '../support/runs';
import { readRunEvents } from '../support/sse';
import { TestStack } from '../support/test-stack';

/** Short, so the suite stays quick; RUNBOX_TEST_RUN_LEASE_SECONDS=30 measures the default. */
const LEASE_SECONDS = Number(process.env.RUNBOX_TEST_RUN_LEASE_SECONDS ?? 4);

/**
 * The gateway as a separate process, SIGKILLed mid-run and started again: the run goes on
 * from what Postgres holds, no tool call runs twice, a call whose outcome is unknown is
 * reported as interrupted, and pending approvals survive.
 */
describe('runs: durability across a gateway crash', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      gatewayProcess: true,
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
        RUNBOX_RUN_SWEEP_SECONDS: '1',
      },
    }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
  });

  afterAll(async () => {
    const dir = join(__dirname, '..', '..', '.runbox', 'test-results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'run-resume.json'), `${JSON.stringify(figures, null, 2)}\n`);
    await stack?.stop();
    await model.stop();
  });

  beforeEach(() => model.reset());

  /** Kills the gateway, starts it again, and returns when the run says it resumed (with timings). */
  async function crashAndRestart(runId: string) {
    const killedAt = Date.now();
    await stack.killGateway();
    await stack.startGatewayProcess();
    const upAt = Date.now();
    // The restarted gateway streams the run from the start; stop at the resume.
    const events = await readRunEvents(stack.url, runs.key, runId, { until: (e) => e.event === 'run.resumed', timeoutMs: 90_000 }).catch((err: Error) => {
      throw new Error(`${err.message}\ngateway output:\n${stack.gatewayOutput}`);
    });
    if (events[events.length - 1].event !== 'run.resumed') throw new Error(`the run ended without resuming: ${events.map((e) => e.event).join(', ')}`);
    const resumed = Date.now();
    return { killToResumeMs: resumed - killedAt, restartToResumeMs: resumed - upAt, restartMs: upAt - killedAt };
  }

  it('a run killed mid tool call finishes after a restart; the finished call is not re-run, the running one is reported interrupted', async () => {
    const sawAfterRestart = gate();
    let resultSeen = '';
    model.enqueue(
      { toolCalls: [{ id: 'call_one', name: 'terminal', arguments: { command: 'echo one >> log.txt' } }] },
      { toolCalls: [{ id: 'call_two', name: 'terminal', arguments: { command: 'echo two >> log.txt; sleep 4; echo two-done >> log.txt' } }] },
      (req) => {
        resultSeen = req.body.messages.find((m) => m.tool_call_id === 'call_two')?.content ?? '';
        sawAfterRestart.open();
        return { content: 'finished' };
      },
    );
    const { id, session_id } = await runs.start({ input: 'log twice' });
    await eventually('the second command to be running', async () => {
      const log = await runs.tool(session_id, 'terminal', { command: 'cat log.txt 2>/dev/null || true' });
      return log.output.includes('two') ? true : undefined;
    });

    const timing = await crashAndRestart(id);
    const run = await runs.wait(id, undefined, 90_000);
    expect(run).toMatchObject({ status: 'completed', output: 'finished' });

    // The model got the interrupted call's result, and was not asked turn 2 again.
    await sawAfterRestart.wait;
    expect(resultSeen).toMatch(/^interrupted: .*outcome is unknown.*It was not run again/);
    expect(model.requests).toHaveLength(3);
    const rows = await runs.toolCallRows(id);
    expect(rows.map((r) => [r.call_id, r.status])).toEqual([
      ['call_one', 'completed'],
      ['call_two', 'interrupted'],
    ]);

    // Every command ran exactly once: the sandbox finished the interrupted one by itself.
    const log = await eventually('the interrupted command to finish in the sandbox', async () => {
      const out = (await runs.tool(session_id, 'read_file', { path: 'log.txt' })).output;
      return out.includes('two-done') ? out : undefined;
    });
    const lines = log.split('\n').filter((l) => /^(one|two|two-done)$/.test(l));
    // A client connecting after the restart gets the whole run, numbered without gaps.
    const events = await readRunEvents(stack.url, runs.key, id);
    const started = events.filter((e) => e.event === 'tool_call.started').map((e) => e.data.tool_call_id);
    const extra = (n: number) => Math.max(0, n - 1);
    const callsRerun =
      extra(lines.filter((l) => l === 'one').length) + extra(lines.filter((l) => l === 'two').length) + extra(started.filter((c) => c === 'call_one').length) + extra(started.filter((c) => c === 'call_two').length);
    figures.killed_mid_tool_call = { lease_seconds: LEASE_SECONDS, ...timing, calls_rerun: callsRerun };
    console.log(`run resumed after a gateway SIGKILL: ${JSON.stringify(figures.killed_mid_tool_call)}`);
    expect(callsRerun).toBe(0);
    expect(lines).toEqual(['one', 'two', 'two-done']);

    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events.find((e) => e.event === 'run.resumed')?.data).toMatchObject({ reason: 'worker_lost', recoveries: 1 });
    expect(started).toEqual(['call_one', 'call_two']);
    expect(events[events.length - 1].event).toBe('run.completed');
  });

  it('a run killed while waiting for the model, whose queue message was lost too, is re-queued by the supervisor and asks again', async () => {
    const hold = gate();
    model.enqueue(
      { toolCalls: [{ id: 'call_a', name: 'terminal', arguments: { command: 'echo a >> once.txt' } }] },
      async () => {
        await hold.wait;
        return { status: 500, body: 'the gateway that asked is gone' };
      },
      { content: 'answered on the second try' },
    );
    const { id, session_id } = await runs.start({ input: 'x' });
    await eventually('the second model call', async () => (model.requests.length === 2 ? true : undefined));

    // Lose the JetStream message as well: only Postgres knows the run is unfinished.
    await stack.killGateway();
    const nc = await connect({ servers: stack.nats.url });
    await (await nc.jetstreamManager()).streams.purge(RUN_STREAM);
    await nc.close();
    hold.open();
    const startedAt = Date.now();
    await stack.startGatewayProcess();

    const run = await runs.wait(id, undefined, 90_000);
    expect(run).toMatchObject({ status: 'completed', output: 'answered on the second try' });
    // The model was asked turn 2 again with the same conversation; the finished call was not re-run.
    expect(model.requests).toHaveLength(3);
    expect(model.requests[2].body.messages).toEqual(model.requests[1].body.messages);
    expect((await runs.tool(session_id, 'read_file', { path: 'once.txt' })).output.match(/^a$/gm)).toHaveLength(1);
    expect((await runs.toolCallRows(id)).map((r) => r.status)).toEqual(['completed']);
    figures.killed_waiting_for_model_queue_lost = { lease_seconds: LEASE_SECONDS, restart_to_completed_ms: Date.now() - startedAt };
  });

  it('a pending approval survives a gateway crash and is decided on the restarted gateway', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_ok', name: 'terminal', arguments: { command: 'echo approved >> approved.txt' } }] }, { content: 'done' });
    const { id, session_id } = await runs.start({ input: 'x', approval_mode: 'prompt' });
    await runs.wait(id, ['requires_approval']);

    await stack.killGateway();
    await stack.startGatewayProcess();

    const waiting = (await runs.get(id)).body;
    expect(waiting.status).toBe('requires_approval');
    expect(waiting.pending_approvals.map((p: { tool_call_id: string }) => p.tool_call_id)).toEqual(['call_ok']);
    expect((await runs.decide(id, { tool_call_id: 'call_ok', decision: 'approve' })).status).toBe(200);
    expect((await runs.wait(id, undefined, 90_000)).status).toBe('completed');
    expect((await runs.tool(session_id, 'read_file', { path: 'approved.txt' })).output.match(/^approved$/gm)).toHaveLength(1);
    expect(model.requests).toHaveLength(2);
  });

  describe('with a second replica', () => {
    let replica: INestApplication;
    let replicaUrl: string;
    let onReplica: RunsClient;

    beforeAll(async () => {
      replica = await createGateway(stack.config);
      await replica.listen(0, '127.0.0.1');
      replicaUrl = `http://127.0.0.1:${(replica.getHttpServer().address() as AddressInfo).port}`;
      onReplica = new RunsClient(stack, runs.key, replicaUrl);
    });

    afterAll(async () => {
      await replica?.close();
    });

    /** Starts a run on the process gateway and returns once that gateway waits for the model's second answer. */
    async function runWaitingOnModel(): Promise<{ id: string; release: () => void }> {
      const hold = gate();
      model.enqueue(
        { toolCalls: [{ id: 'call_r', name: 'terminal', arguments: { command: 'echo r >> replica.txt' } }] },
        async () => {
          await hold.wait;
          return { status: 500, body: 'nobody is listening any more' };
        },
        { content: 'finished elsewhere' },
      );
      // Only the process gateway consumes the queue until the replica joins below.
      await replica.close();
      const { id } = await runs.start({ input: 'x' });
      await eventually('the second model call', async () => (model.requests.length === 2 ? true : undefined));
      replica = await createGateway(stack.config);
      await replica.listen(Number(new URL(replicaUrl).port), '127.0.0.1');
      return { id, release: hold.open };
    }

    it('takes over at once from a gateway that stops in order (SIGTERM)', async () => {
      const { id, release } = await runWaitingOnModel();
      const stoppedAt = Date.now();
      await stack.killGateway('SIGTERM');
      release();
      const run = await onReplica.wait(id, undefined, 90_000);
      const handoverMs = Date.now() - stoppedAt;
      expect(run).toMatchObject({ status: 'completed', output: 'finished elsewhere' });
      const events = await readRunEvents(replicaUrl, runs.key, id);
      expect(events.find((e) => e.event === 'run.resumed')?.data).toMatchObject({ reason: 'requeued', recoveries: 0 });
      expect(events.filter((e) => e.event === 'tool_call.started')).toHaveLength(1);
      figures.graceful_stop_handover = { lease_seconds: LEASE_SECONDS, stop_to_completed_ms: handoverMs };
      await stack.startGatewayProcess();
    });

    it('takes over a crashed gateway\'s run once its lease lapses (SIGKILL)', async () => {
      const { id, release } = await runWaitingOnModel();
      const killedAt = Date.now();
      await stack.killGateway();
      release();
      const run = await onReplica.wait(id, undefined, 90_000);
      expect(run).toMatchObject({ status: 'completed', output: 'finished elsewhere' });
      const events = await readRunEvents(replicaUrl, runs.key, id);
      expect(events.find((e) => e.event === 'run.resumed')?.data).toMatchObject({ reason: 'worker_lost', recoveries: 1 });
      expect((await onReplica.toolCallRows(id)).map((r) => r.status)).toEqual(['completed']);
      figures.crash_takeover_by_replica = { lease_seconds: LEASE_SECONDS, kill_to_completed_ms: Date.now() - killedAt };
      await stack.startGatewayProcess();
    });
  });
});
