import { startNats, TestNats } from '@app/testing';
import pino from 'pino';
import { z } from 'zod';
import { MAX_LARGE_MESSAGE_BYTES, NatsClient } from '../src';

/** NatsClient against a real nats-server whose max_payload is 64 KiB, so "large" is cheap. */
describe('NatsClient over a server with a 64 KiB max_payload', () => {
  const MAX_PAYLOAD = 64 * 1024;
  let nats: TestNats;
  let server: NatsClient;
  let client: NatsClient;
  const logger = pino({ level: 'silent' });

  const textSchema = z.object({ text: z.string() });
  const replySchema = z.discriminatedUnion('ok', [
    z.object({ ok: z.literal(true), text: z.string(), served_by: z.string() }),
    z.object({ ok: z.literal(false), served_by: z.string(), error: z.object({ code: z.string(), message: z.string() }) }),
  ]);
  const errorReply = (error: { code: string; message: string }) => ({ ok: false, served_by: 'server-1', error });

  beforeAll(async () => {
    nats = await startNats({ maxPayload: MAX_PAYLOAD });
    server = await NatsClient.connect(nats.url, 'test-server', logger);
    client = await NatsClient.connect(nats.url, 'test-client', logger);
    server.serve('test.echo', textSchema, async ({ text }) => ({ ok: true, text: text.split('').reverse().join(''), served_by: 'server-1' }), { errorReply });
    server.serve(
      'test.throws',
      textSchema,
      async () => {
        throw new Error('a handler bug');
      },
      { errorReply },
    );
    // A reply JSON cannot encode: the send fails, and the caller must still hear of it.
    server.serve('test.unencodable', textSchema, async () => ({ ok: true, text: BigInt(1), served_by: 'server-1' }), { errorReply });
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
    const reply = await client.request('test.echo', textSchema, { text }, replySchema, 10_000);
    expect(reply).toEqual({ ok: true, text: text.split('').reverse().join(''), served_by: 'server-1' });
  });

  it('answers a handler that throws with an error in the subject’s reply shape, with an error id', async () => {
    const reply = await client.request('test.throws', textSchema, { text: 'x' }, replySchema, 10_000);
    expect(reply).toMatchObject({ ok: false, served_by: 'server-1', error: { code: 'internal_error' } });
    expect(reply.ok === false && reply.error.message).toMatch(/error id [0-9a-f-]{36}/);
  });

  it('answers with an error when the reply itself cannot be sent, rather than leaving the caller to time out', async () => {
    const reply = await client.request('test.unencodable', textSchema, { text: 'x' }, replySchema, 10_000);
    expect(reply).toMatchObject({ ok: false, served_by: 'server-1', error: { code: 'reply_failed' } });
  });

  it('refuses an envelope announcing more than the limit for any message, without fetching it', async () => {
    const envelope = { $runbox_large_message: { subject: '_INBOX.nothing-here', bytes: MAX_LARGE_MESSAGE_BYTES + 1, chunk_bytes: 1000 } };
    const raw = await client.connection.request('test.echo', new TextEncoder().encode(JSON.stringify(envelope)), { timeout: 10_000 });
    const reply = replySchema.parse(JSON.parse(new TextDecoder().decode(raw.data)));
    expect(reply).toMatchObject({ ok: false, error: { code: 'bad_request', message: expect.stringMatching(/over the \d+-byte limit for any message/) } });
  });

  it('refuses to publish over the message limit (nobody would fetch the pieces)', () => {
    expect(() => client.publish('test.event', textSchema, { text: 'x'.repeat(MAX_PAYLOAD) })).toThrow(/over the \d+-byte message limit/);
  });
});
