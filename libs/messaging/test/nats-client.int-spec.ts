import { startNats, TestNats } from '@app/testing';
import pino from 'pino';
import { EventContract, RequestContract, rpcFailure, rpcFailureSchema } from '@app/contracts';
import { z } from 'zod';
import { ContractViolationError, MAX_LARGE_MESSAGE_BYTES, NatsClient } from '../src';

/** NatsClient against a real nats-server whose max_payload is 64 KiB, so "large" is cheap. */
describe('NatsClient over a server with a 64 KiB max_payload', () => {
  const MAX_PAYLOAD = 64 * 1024;
  let nats: TestNats;
  let server: NatsClient;
  let client: NatsClient;
  const logger = pino({ level: 'silent' });

  const textSchema = z.object({ text: z.string() });
  const replySchema = z.union([z.object({ ok: z.literal(true), text: z.string() }), rpcFailureSchema]);
  type Text = z.infer<typeof textSchema>;
  type Reply = z.infer<typeof replySchema>;
  const contract = (subject: string): RequestContract<Text, Reply> => ({
    subject,
    request: textSchema,
    reply: replySchema,
    errorReply: rpcFailure,
    maxBytes: MAX_LARGE_MESSAGE_BYTES,
  });
  const event: EventContract<Text> = { subject: 'test.event', payload: textSchema, maxBytes: 16 * 1024 };
  const responderId = 'server-1';

  beforeAll(async () => {
    nats = await startNats({ maxPayload: MAX_PAYLOAD });
    server = await NatsClient.connect(nats.url, 'test-server', logger);
    client = await NatsClient.connect(nats.url, 'test-client', logger);
    server.serve(contract('test.echo'), async ({ text }) => ({ ok: true as const, text: text.split('').reverse().join('') }), { responderId });
    server.serve(
      contract('test.throws'),
      async () => {
        throw new Error('a handler bug');
      },
      { responderId },
    );
    // A handler whose reply breaks the contract: the caller gets the error reply instead.
    server.serve(contract('test.bad-reply'), async () => ({ ok: true, text: 42 }) as unknown as Reply, { responderId });
    // The other side of the same bug: a responder outside the adapter answering off-contract.
    server.connection.subscribe('test.off-contract', { callback: (_err, msg) => msg.respond(new TextEncoder().encode('{"surprise": true}')) });
    await server.flush();
  });

  afterAll(async () => {
    await client?.close();
    await server?.close();
    await nats?.stop();
  });

  it('reads the byte limit from the server, not from an assumption', () => {
    expect(client.messageLimitBytes).toBeLessThan(MAX_PAYLOAD);
    expect(client.messageLimitBytes).toBeGreaterThan(MAX_PAYLOAD - 8 * 1024);
  });

  it('carries a request and a reply of many times max_payload whole, multi-byte characters intact', async () => {
    const text = 'é€😀'.repeat(100_000) + 'end';
    const reply = await client.request(contract('test.echo'), { text }, { timeoutMs: 10_000 });
    expect(reply).toEqual({ ok: true, text: text.split('').reverse().join('') });
  });

  it('answers a handler that throws with an error in the subject’s reply shape, with an error id', async () => {
    const reply = await client.request(contract('test.throws'), { text: 'x' }, { timeoutMs: 10_000 });
    expect(reply).toMatchObject({ ok: false, executor_id: 'server-1', error: { code: 'internal_error' } });
    expect(reply.ok === false && reply.error.message).toMatch(/error id [0-9a-f-]{36}/);
  });

  it('answers with an error when the reply breaks its contract, rather than sending it or leaving the caller to time out', async () => {
    const reply = await client.request(contract('test.bad-reply'), { text: 'x' }, { timeoutMs: 10_000 });
    expect(reply).toMatchObject({ ok: false, executor_id: 'server-1', error: { code: 'reply_failed' } });
  });

  it('raises a reply that breaks its contract as a contract violation (an internal error), not as a validation error', async () => {
    const call = client.request(contract('test.off-contract'), { text: 'x' }, { timeoutMs: 10_000 });
    await expect(call).rejects.toThrow(ContractViolationError);
    await expect(call).rejects.toThrow(/the reply on test.off-contract broke its contract/);
  });

  it('refuses to send a request that breaks its contract', async () => {
    await expect(client.request(contract('test.echo'), { text: 7 } as unknown as Text, { timeoutMs: 10_000 })).rejects.toThrow(ContractViolationError);
  });

  it('answers a request that breaks the contract with bad_request in the reply shape', async () => {
    const raw = await client.connection.request('test.echo', new TextEncoder().encode('{"text": 7}'), { timeout: 10_000 });
    expect(replySchema.parse(JSON.parse(new TextDecoder().decode(raw.data)))).toMatchObject({ ok: false, error: { code: 'bad_request' } });
  });

  it('refuses an envelope announcing more than the limit for any message, without fetching it', async () => {
    const envelope = { $runbox_large_message: { subject: '_INBOX.nothing-here', bytes: MAX_LARGE_MESSAGE_BYTES + 1, chunk_bytes: 1000 } };
    const raw = await client.connection.request('test.echo', new TextEncoder().encode(JSON.stringify(envelope)), { timeout: 10_000 });
    const reply = replySchema.parse(JSON.parse(new TextDecoder().decode(raw.data)));
    expect(reply).toMatchObject({ ok: false, error: { code: 'bad_request', message: expect.stringMatching(/over its \d+-byte limit/) } });
  });

  it('refuses to publish over the message limit (nobody would fetch the pieces)', () => {
    expect(() => client.publish(event, { text: 'x'.repeat(MAX_PAYLOAD) })).toThrow(/over its \d+-byte limit/);
  });

  it('stops answering on stopResponding, letting a request already taken finish, while events still arrive', async () => {
    const draining = await NatsClient.connect(nats.url, 'test-draining', logger);
    try {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let taken!: () => void;
      const arrived = new Promise<void>((resolve) => (taken = resolve));
      draining.serve(contract('test.slow'), async ({ text }) => {
        taken();
        await held;
        return { ok: true as const, text };
      }, { responderId });
      const events: string[] = [];
      draining.subscribe(event, ({ text }) => events.push(text));
      await draining.flush();

      const inFlight = client.request(contract('test.slow'), { text: 'taken before' }, { timeoutMs: 5_000 });
      await arrived;
      await draining.stopResponding();
      await expect(client.request(contract('test.slow'), { text: 'after' }, { timeoutMs: 5_000 })).rejects.toMatchObject({ noResponders: true });
      release();
      await expect(inFlight).resolves.toEqual({ ok: true, text: 'taken before' });
      client.publish(event, { text: 'still heard' });
      await client.flush();
      await draining.flush();
      expect(events).toEqual(['still heard']);
    } finally {
      await draining.close();
    }
  });
});
