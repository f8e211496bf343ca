import { ExecutorAnnouncement, EXECUTOR_ANNOUNCE_SUBJECT, pinnedToolCallSubject } from '@app/contracts';
import { ScriptedModelServer } from '@app/testing';
import { connect, NatsConnection } from 'nats';
import { RunsClient } from '../support/runs';
import { TestStack } from '../support/test-stack';

/**
 * An executor that takes a tool call and never answers (stalled, or lost its Docker host
 * mid-call). The run ends failed with a readable error instead of hanging; the call may have
 * taken effect, so it is never sent again, and the error says to check its effects.
 */
describe('runs: an executor that never answers', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let runs: RunsClient;
  let silent: NatsConnection;
  let heartbeat: NodeJS.Timeout | undefined;
  const delivered: string[] = [];

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      executor: false,
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_EXECUTOR_GRACE_MS: '1000', RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: '1' },
    }).start();
    runs = new RunsClient(stack, (await stack.createTenant()).apiKey);
    // Stands where an executor would: announces itself, with room, on every heartbeat, and
    // answers nothing on its own subject.
    silent = await connect({ servers: stack.nats.url });
    silent.subscribe(pinnedToolCallSubject('silent-1'), { callback: (_err, msg) => delivered.push(msg.string()) });
    await silent.flush();
    const announcement: ExecutorAnnouncement = {
      executor_id: 'silent-1',
      instance: 'silent-1-a',
      started_at: Date.now(),
      capacity: 10,
      sandboxes: 0,
      warm_pool: 0,
      version: 'test',
      state: 'ready',
      heartbeat_ms: 200,
    };
    const announce = () => silent.publish(EXECUTOR_ANNOUNCE_SUBJECT, JSON.stringify(announcement));
    announce();
    heartbeat = setInterval(announce, 200);
  });

  afterAll(async () => {
    clearInterval(heartbeat);
    await silent?.close();
    await stack?.stop();
    await model.stop();
  });

  it('ends the run failed with a readable error, and never sends the call again', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_lost', name: 'terminal', arguments: { command: 'touch once.txt', timeout_seconds: 1 } }] }, { content: 'never asked' });
    const { id } = await runs.start({ input: 'do it once' });
    const run = await runs.wait(id);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(
      'tool terminal got no answer: the executor did not answer in time; the tool call may or may not have run; check its effects before running it again',
    );
    expect(await runs.toolCallRows(id)).toEqual([expect.objectContaining({ call_id: 'call_lost', status: 'failed' })]);
    expect(model.requests).toHaveLength(1);
    // Delivered to the executor exactly once: a call whose outcome is unknown is never re-sent.
    expect(delivered).toHaveLength(1);
    expect(JSON.parse(delivered[0])).toMatchObject({ tool: 'terminal', arguments: { command: 'touch once.txt' } });
  });

  it('answers a direct call it cannot vouch for with 503 and no Retry-After, so a client does not repeat it blindly', async () => {
    const session = (await stack.request('POST', '/v1/sessions', { key: runs.key, body: {} })).body.id;
    const before = delivered.length;
    const res = await stack.request('POST', `/v1/sessions/${session}/tools/terminal`, {
      key: runs.key,
      body: { arguments: { command: 'touch direct.txt', timeout_seconds: 1 } },
    });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'executor_unavailable', details: { outcome_unknown: true } });
    expect(res.body.error.message).toMatch(/may or may not have run; check its effects before repeating it$/);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(delivered.length - before).toBe(1);
  });
});
