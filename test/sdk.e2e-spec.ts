import { ScriptedModelServer } from '@app/testing';
import { createHash, randomBytes } from 'node:crypto';
import { AuthenticationError, BadRequestError, NotFoundError, Runbox, RunEvent } from '@runbox/sdk';
import { CuttingProxy } from './support/cutting-proxy';
import { gate } from './support/runs';
import { readRunEvents } from './support/sse';
import { TenantCredentials, TestStack } from './support/test-stack';

/** The TypeScript SDK against the real gateway and executor, with the scripted model. */
describe('TypeScript SDK', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let rb: Runbox;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    tenant = await stack.createTenant();
    rb = new Runbox({ apiKey: tenant.apiKey, baseUrl: stack.url, retryDelayMs: { base: 50, max: 200 } });
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  async function collect(stream: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
    const events: RunEvent[] = [];
    for await (const event of stream) events.push(event);
    return events;
  }

  it('streams a run to its end with typed events, and wait returns the finished run', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'echo from-the-sdk' } }] }, { content: 'all done' });
    const run = await rb.runs.create({ input: 'say something' });
    expect(run).toMatchObject({ id: expect.stringMatching(/^run_/), status: 'queued' });

    const events = await collect(rb.runs.stream(run.id));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('run.queued');
    expect(types).toEqual(expect.arrayContaining(['run.started', 'tool_call.started', 'tool_call.completed']));
    expect(types[types.length - 1]).toBe('run.completed');
    const completed = events.find((e) => e.type === 'tool_call.completed');
    expect(completed?.type === 'tool_call.completed' && completed.data.output).toContain('from-the-sdk');
    const last = events[events.length - 1];
    expect(last.type === 'run.completed' && last.data.output).toBe('all done');
    // Exactly what the server stored, in order.
    const raw = await readRunEvents(stack.url, tenant.apiKey, run.id);
    expect(events.map((e) => [e.id, e.type])).toEqual(raw.map((e) => [e.id, e.event]));

    const finished = await rb.runs.wait(run.id);
    expect(finished).toMatchObject({ id: run.id, status: 'completed', output: 'all done' });
    // Resuming after the terminal event yields nothing and ends.
    expect(await collect(rb.runs.stream(run.id, { lastEventId: last.id }))).toEqual([]);
  });

  it('resumes a stream cut in the middle of an event with Last-Event-ID: nothing lost, nothing twice', async () => {
    const held = gate();
    model.enqueue({ toolCalls: [{ id: 'call_cut', name: 'terminal', arguments: { command: 'echo before-the-cut' } }] }, async () => {
      await held.wait;
      return { content: 'after the cut' };
    });
    const port = Number(new URL(stack.url).port);
    // The first event stream is cut halfway through its tool_call.completed event.
    const proxy = new CuttingProxy({ host: '127.0.0.1', port }, (connection, seen, chunk) => {
      if (!connection.requestHead.includes('/events') || proxy.connections.some((c) => c.cut)) return undefined;
      const at = seen.indexOf('event: tool_call.completed');
      if (at < 0) return undefined;
      return Math.max(0, at + 10 - (seen.length - chunk.length));
    });
    const proxied = new Runbox({ apiKey: tenant.apiKey, baseUrl: await proxy.start(), retryDelayMs: { base: 50, max: 200 } });
    try {
      const run = await proxied.runs.create({ input: 'cut me' });
      const events: RunEvent[] = [];
      for await (const event of proxied.runs.stream(run.id)) {
        events.push(event);
        // The model's next answer is held until the stream has come back with the cut event.
        if (event.type === 'tool_call.completed') held.open();
      }
      // One connection was cut; the stream came back asking for what followed the last whole event.
      expect(proxy.connections.filter((c) => c.cut)).toHaveLength(1);
      const cutAt = events.findIndex((e) => e.type === 'tool_call.completed');
      const resumed = proxy.connections.filter((c) => /last-event-id: \d+/i.test(c.requestHead));
      expect(resumed.length).toBeGreaterThanOrEqual(1);
      expect(resumed[0].requestHead.toLowerCase()).toContain(`last-event-id: ${events[cutAt - 1].id}\r\n`);

      const ids = events.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      const raw = await readRunEvents(stack.url, tenant.apiKey, run.id);
      expect(events.map((e) => [e.id, e.type])).toEqual(raw.map((e) => [e.id, e.event]));
      expect(events[events.length - 1]).toMatchObject({ type: 'run.completed', data: { output: 'after the cut' } });
    } finally {
      held.open();
      await proxy.stop();
    }
  });

  it('approves and denies tool calls that wait for approval', async () => {
    model.enqueue(
      { toolCalls: [{ id: 'call_ok', name: 'terminal', arguments: { command: 'echo approved-ran' } }] },
      { toolCalls: [{ id: 'call_no', name: 'terminal', arguments: { command: 'rm -rf notes' } }] },
      (req) => ({ content: `saw: ${req.body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join(' | ')}` }),
    );
    const run = await rb.runs.create({ input: 'needs approval', approval_mode: 'prompt' });
    let decided = 0;
    for await (const event of rb.runs.stream(run.id)) {
      if (event.type !== 'tool_call.approval_required') continue;
      if (event.data.tool_call_id === 'call_ok') await rb.runs.approve(run.id, 'call_ok');
      else await rb.runs.deny(run.id, event.data.tool_call_id, { reason: 'not on my workspace' });
      decided++;
    }
    expect(decided).toBe(2);
    const finished = await rb.runs.get(run.id);
    expect(finished.status).toBe('completed');
    expect(finished.output).toContain('approved-ran');
    expect(finished.output).toContain('not on my workspace');
  });

  it('cancels a run, and the idempotency key returns the first run', async () => {
    model.enqueue({ toolCalls: [{ id: 'call_slow', name: 'terminal', arguments: { command: 'sleep 60' } }] });
    const key = `idem-${Date.now()}`;
    const run = await rb.runs.create({ input: 'cancel me' }, { idempotencyKey: key });
    const again = await rb.runs.create({ input: 'cancel me' }, { idempotencyKey: key });
    expect(again.id).toBe(run.id);
    // Cancelled while its tool call runs.
    for await (const event of rb.runs.stream(run.id)) {
      if (event.type === 'tool_call.started') break;
    }
    const cancelled = await rb.runs.cancel(run.id);
    expect(cancelled.id).toBe(run.id);
    expect((await rb.runs.wait(run.id)).status).toBe('cancelled');
    const page = await rb.runs.list({ session_id: run.session_id });
    expect(page.data.map((r) => r.id)).toEqual([run.id]);
    const iterated: string[] = [];
    for await (const r of rb.runs.list({ session_id: run.session_id })) iterated.push(r.id);
    expect(iterated).toEqual([run.id]);
  });

  it("runs tools and commands in a session's sandbox and deletes it", async () => {
    const session = await rb.sessions.create({ metadata: { purpose: 'sdk' } });
    expect(session.id).toMatch(/^ses_/);
    expect((await rb.sessions.get(session.id)).info?.metadata).toEqual({ purpose: 'sdk' });

    const result = await session.commands.run('mkdir -p src && echo out-text && echo err-text >&2 && touch src/a.txt && (exit 3)', { timeoutSeconds: 30 });
    expect(result).toMatchObject({ exitCode: 3, stdout: 'out-text', stderr: 'err-text', timedOut: false });
    const timedOut = await session.commands.run('sleep 5', { timeoutSeconds: 1 });
    expect(timedOut).toMatchObject({ exitCode: expect.any(Number), timedOut: true });

    const called = await session.tools.call('read_file', { path: 'src/a.txt' });
    expect(called.is_error).toBe(false);
    await session.commands.run('mkdir -p src/lib && ln -s a.txt src/link');
    expect(await session.files.list('src', { recursive: true })).toEqual([
      { path: 'src/a.txt', type: 'file' },
      { path: 'src/lib', type: 'dir' },
      { path: 'src/link', type: 'symlink', target: 'a.txt' },
    ]);

    await session.delete();
    await expect(rb.sessions.get(session.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("reads, writes, lists and removes a session's files, byte for byte", async () => {
    const session = await rb.sessions.create();
    const bytes = randomBytes(300_000);
    const written = await session.files.write('data/blob.bin', bytes);
    expect(written).toMatchObject({ size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    expect(Buffer.from(await session.files.read('data/blob.bin')).equals(bytes)).toBe(true);
    await session.files.write('data/notes.md', 'héllo ✓\n');
    expect(await session.files.readText('/data/notes.md')).toBe('héllo ✓\n');
    // A stream of unknown length is taken too.
    await session.files.write('data/streamed.txt', new Blob(['from a stream']).stream());
    expect(await session.files.readText('data/streamed.txt')).toBe('from a stream');
    expect((await session.files.list('data')).map((e) => e.path)).toEqual(['data/blob.bin', 'data/notes.md', 'data/streamed.txt']);
    await session.files.remove('data/notes.md');
    await expect(session.files.read('data/notes.md')).rejects.toMatchObject({ constructor: NotFoundError, code: 'not_found' });
    const listed = await rb.sessions.list().all();
    expect(listed.map((s) => s.id)).toContain(session.id);
    await session.delete();
  });

  it('throws typed errors carrying the API code and status, and honours AbortSignal', async () => {
    const missing = await rb.runs.get('run_doesnotexist000000').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });

    const invalid = await rb.runs.create({ input: '' }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(BadRequestError);
    expect(invalid).toMatchObject({ status: 400, code: 'validation_failed' });
    expect((invalid as Error).message).toMatch(/input/);

    const stranger = new Runbox({ apiKey: 'rbx_not_a_real_key', baseUrl: stack.url });
    await expect(stranger.sessions.create()).rejects.toBeInstanceOf(AuthenticationError);

    const controller = new AbortController();
    controller.abort(new Error('stop right there'));
    await expect(rb.runs.list({}, { signal: controller.signal })).rejects.toThrow('stop right there');
  });
});
