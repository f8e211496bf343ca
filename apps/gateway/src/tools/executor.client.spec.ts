import { loadConfig } from '@app/config';
import { NatsClient, NatsTimeoutError } from '@app/messaging';
import { ExecutorAnnouncements } from '../executors/executor-announcements';
import { ExecutorRegistry } from '../executors/executor-registry';
import { ExecutorClient, ExecutorUnavailableError } from './executor.client';

const call = { tenant_id: 'ten_1', session_id: 'ses_1', call_id: 'c1', tool: 'terminal', arguments: { command: 'true' }, max_output_chars: 100, timeout_ms: 1_000 };
const reply = { ok: true as const, executor_id: 'exec-1', result: { output: '', metadata: {}, is_error: false } };

function clientAnswering(...answers: Array<() => Promise<unknown>>) {
  // exec-1 is heard from and serving: these tests are about what one call on it does.
  const registry = new ExecutorRegistry(60_000, 2_000);
  registry.heard({ executor_id: 'exec-1', instance: 'i1', started_at: 1, capacity: 10, sandboxes: 1, warm_pool: 0, version: 'test', state: 'ready', heartbeat_ms: 60_000 });
  const client = new ExecutorClient({} as NatsClient, loadConfig({}), registry, {} as ExecutorAnnouncements);
  const sent = jest.fn(() => answers.shift()!());
  (client as unknown as { request: typeof sent }).request = sent;
  return { client, sent };
}

describe('ExecutorClient.callTool', () => {
  it('sends again while nobody listens for a moment (an executor reconnecting to another NATS server): nothing ran, so it is safe', async () => {
    const nobody = () => Promise.reject(new NatsTimeoutError('runbox.executor.tool.call.v1.exec-1', true));
    const { client, sent } = clientAnswering(nobody, nobody, () => Promise.resolve(reply));
    await expect(client.callTool(call, 'exec-1')).resolves.toEqual(reply);
    expect(sent).toHaveBeenCalledTimes(3);
  });

  it('never sends again a call an executor took and did not answer: its outcome is unknown', async () => {
    const { client, sent } = clientAnswering(() => Promise.reject(new NatsTimeoutError('runbox.executor.tool.call.v1.exec-1', false)));
    await expect(client.callTool(call, 'exec-1')).rejects.toMatchObject({ outcomeUnknown: true });
    expect(sent).toHaveBeenCalledTimes(1);
  });

  it('asks the same executor again while the session\'s sandbox is still starting there, each try waiting the tool\'s limit, a start slice and the grace', async () => {
    const starting = { ok: false as const, executor_id: 'exec-1', error: { code: 'sandbox_starting', message: 'not ready within 5 s' } };
    const { client, sent } = clientAnswering(() => Promise.resolve(starting), () => Promise.resolve(starting), () => Promise.resolve(reply));
    await expect(client.callTool(call, 'exec-1')).resolves.toEqual(reply);
    expect(sent).toHaveBeenCalledTimes(3);
    for (const [options, request] of sent.mock.calls as unknown as Array<[{ timeoutMs: number; subject: string }, { start_timeout_ms: number; call_id: string }]>) {
      expect(options.subject).toBe('runbox.executor.tool.call.v1.exec-1');
      expect(request).toMatchObject({ call_id: 'c1', start_timeout_ms: 5_000 });
      // The default grace is 15 s: an answer comes within this wait whether or not the sandbox started.
      expect(options.timeoutMs).toBe(5_000 + 1_000 + 15_000);
    }
  });

  it('asks the executor that placed a new session again while its sandbox starts, never placing it afresh on another', async () => {
    const registry = new ExecutorRegistry(60_000, 2_000);
    for (const id of ['exec-1', 'exec-2']) {
      registry.heard({ executor_id: id, instance: id, started_at: 1, capacity: 10, sandboxes: 0, warm_pool: 0, version: 'test', state: 'ready', heartbeat_ms: 60_000 });
    }
    const client = new ExecutorClient({} as NatsClient, loadConfig({}), registry, {} as ExecutorAnnouncements);
    const subjects: string[] = [];
    const sent = jest.fn(async (options: { subject: string }) => {
      subjects.push(options.subject);
      const executor_id = options.subject.split('.').pop()!;
      return subjects.length < 3 ? { ok: false as const, executor_id, error: { code: 'sandbox_starting', message: 'not ready' } } : { ...reply, executor_id };
    });
    (client as unknown as { request: typeof sent }).request = sent;
    await expect(client.callTool(call, null)).resolves.toMatchObject({ ok: true });
    expect(subjects).toHaveLength(3);
    expect(new Set(subjects).size).toBe(1);
  });

  it('stops asking once the start timeout has passed, and says nothing ran', async () => {
    const starting = { ok: false as const, executor_id: 'exec-1', error: { code: 'sandbox_starting', message: 'not ready within 1 s' } };
    const registry = new ExecutorRegistry(60_000, 2_000);
    registry.heard({ executor_id: 'exec-1', instance: 'i1', started_at: 1, capacity: 10, sandboxes: 1, warm_pool: 0, version: 'test', state: 'ready', heartbeat_ms: 60_000 });
    const client = new ExecutorClient({} as NatsClient, loadConfig({ RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: '1' }), registry, {} as ExecutorAnnouncements);
    const sent = jest.fn(async (_options: unknown, request: { start_timeout_ms: number }) => {
      // The executor waits out the slice it was given before it answers "not ready".
      await new Promise((resolve) => setTimeout(resolve, request.start_timeout_ms));
      return starting;
    });
    (client as unknown as { request: typeof sent }).request = sent;
    const answer = await client.callTool(call, 'exec-1');
    expect(answer).toMatchObject({ ok: false, error: { code: 'sandbox_starting', message: expect.stringMatching(/was not ready within 1 s .*; nothing ran; try again shortly$/) } });
    // No slice outlasts what is left of the start timeout.
    expect(sent.mock.calls.every(([, request]) => request.start_timeout_ms <= 1_000)).toBe(true);
  });

  it('reports an executor that stays away, within a bounded time', async () => {
    const { client, sent } = clientAnswering(...Array.from({ length: 100 }, () => () => Promise.reject(new NatsTimeoutError('s', true))));
    await expect(client.callTool(call, 'exec-1')).rejects.toBeInstanceOf(ExecutorUnavailableError);
    expect(sent.mock.calls.length).toBeGreaterThan(2);
    expect(sent.mock.calls.length).toBeLessThan(15);
  });
});

type Presence = Awaited<ReturnType<ExecutorAnnouncements['presence']>>;

describe('ExecutorClient.callTool while its executor is silent', () => {
  const heartbeatMs = 50;
  /** exec-1, heard once with a short heartbeat, then silent; `presence` scripts what asking it directly finds. */
  function silentExecutor(presence: () => Presence | Promise<Presence>) {
    const registry = new ExecutorRegistry(60_000, heartbeatMs);
    registry.heard({ executor_id: 'exec-1', instance: 'i1', started_at: 1, capacity: 10, sandboxes: 1, warm_pool: 0, version: 'test', state: 'ready', heartbeat_ms: heartbeatMs });
    const probes = jest.fn(async () => presence());
    const announcements = { presence: probes, askAndWait: () => Promise.resolve() } as unknown as ExecutorAnnouncements;
    const client = new ExecutorClient({} as NatsClient, loadConfig({ RUNBOX_EXECUTOR_HEARTBEAT_SECONDS: String(heartbeatMs / 1000) }), registry, announcements);
    return { client, probes, setRequest: (request: () => Promise<unknown>) => ((client as unknown as { request: typeof request }).request = request) };
  }

  it('keeps waiting for the reply of an executor that is silent but still connected (slow, not gone)', async () => {
    const { client, probes, setRequest } = silentExecutor(() => 'connected');
    let answer: (value: unknown) => void = () => undefined;
    setRequest(() => new Promise((resolve) => (answer = resolve)));
    const result = client.callTool(call, 'exec-1');
    // Well past three heartbeats: asked several times, never given up.
    while (probes.mock.calls.length < 3) await new Promise((resolve) => setTimeout(resolve, heartbeatMs));
    answer(reply);
    await expect(result).resolves.toEqual(reply);
  });

  it('ends a call the executor took once nobody has listened for it past a NATS reconnect: the call may or may not have run', async () => {
    const { client, probes, setRequest } = silentExecutor(() => 'gone');
    setRequest(() => new Promise(() => undefined));
    await expect(client.callTool(call, 'exec-1')).rejects.toMatchObject({ outcomeUnknown: true, lostExecutorId: 'exec-1' });
    // One "no responders" is not believed: the probes found nobody again and again first.
    expect(probes.mock.calls.length).toBeGreaterThan(3);
  }, 15_000);

  it('keeps waiting while nobody listens only for a moment (an executor reconnecting to another NATS server)', async () => {
    let reconnected = false;
    const { client, probes, setRequest } = silentExecutor(() => (reconnected ? 'answered' : 'gone'));
    let answer: (value: unknown) => void = () => undefined;
    setRequest(() => new Promise((resolve) => (answer = resolve)));
    let settled = false;
    const result = client.callTool(call, 'exec-1').finally(() => (settled = true));
    while (!settled && probes.mock.calls.length < 3) await new Promise((resolve) => setTimeout(resolve, heartbeatMs));
    reconnected = true;
    const asked = probes.mock.calls.length;
    while (!settled && probes.mock.calls.length < asked + 3) await new Promise((resolve) => setTimeout(resolve, heartbeatMs));
    answer(reply);
    await expect(result).resolves.toEqual(reply);
  });

  it('says nothing ran when the tries found nobody listening, not mistaking one sent again during the probe for one the process took', async () => {
    let tries = 0;
    let nobody = (): void => undefined;
    let probe = 0;
    const { client, setRequest } = silentExecutor(async (): Promise<Presence> => {
      const before = tries;
      // The open try finds nobody; the client sends it again while this probe is out.
      nobody();
      if (++probe === 1) while (tries === before) await new Promise((resolve) => setTimeout(resolve, 5));
      return 'gone';
    });
    setRequest(() => {
      tries++;
      return new Promise((_, reject) => (nobody = () => reject(new NatsTimeoutError('s', true))));
    });
    await expect(client.callTool(call, 'exec-1')).rejects.toMatchObject({ outcomeUnknown: false, lostExecutorId: 'exec-1' });
    expect(tries).toBeGreaterThanOrEqual(2);
  }, 15_000);
});
