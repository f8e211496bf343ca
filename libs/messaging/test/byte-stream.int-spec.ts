import { startNats, TestNats } from '@app/testing';
import { connect, NatsConnection } from 'nats';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ByteStreamError, offerByteStream, pullByteStream } from '../src';

/** The pulled byte stream between two real NATS connections (sender and receiver apart, as gateway and executor are). */
describe('byte stream over NATS', () => {
  const CHUNK = 64 * 1024;
  let nats: TestNats;
  let sender: NatsConnection;
  let receiver: NatsConnection;

  beforeAll(async () => {
    nats = await startNats();
    sender = await connect({ servers: nats.url });
    receiver = await connect({ servers: nats.url });
  });

  afterAll(async () => {
    await sender?.close();
    await receiver?.close();
    await nats?.stop();
  });

  /** A source that makes `total` bytes only as they are read, counting what it made. */
  const lazySource = (total: number) => {
    const made = { bytes: 0, destroyed: false };
    const source = new Readable({
      highWaterMark: 16 * 1024,
      read() {
        const n = Math.min(16 * 1024, total - made.bytes);
        if (n <= 0) return void this.push(null);
        made.bytes += n;
        this.push(randomBytes(n));
      },
      destroy(err, cb) {
        made.destroyed = true;
        cb(err);
      },
    });
    return { source, made };
  };

  /**
   * Offers and waits until the server has the sender's subscription: in service code the
   * inbox travels in a message on the same connection, which the server sees after it.
   */
  const offer = async (source: Readable, limits: Parameters<typeof offerByteStream>[2]) => {
    const made = offerByteStream(sender, source, limits);
    await sender.flush();
    return made;
  };

  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

  it('carries every byte in order, in chunks no larger than asked', async () => {
    const data = randomBytes(3 * 1024 * 1024 + 123);
    const offered = await offer(Readable.from([data.subarray(0, 1000), data.subarray(1000)]), { chunkBytes: CHUNK });
    const stream = pullByteStream(receiver, offered.subject, { maxBytes: data.length, chunkBytes: CHUNK });
    const parts: Buffer[] = [];
    for await (const part of stream) {
      expect((part as Buffer).length).toBeLessThanOrEqual(CHUNK);
      parts.push(part as Buffer);
    }
    await offered.done;
    expect(sha(Buffer.concat(parts))).toBe(sha(data));
  });

  it('reads the source only as fast as a slow consumer drains: a few chunks ahead at most', async () => {
    const total = 8 * 1024 * 1024;
    const { source, made } = lazySource(total);
    const offered = await offer(source, { chunkBytes: CHUNK });
    const stream = pullByteStream(receiver, offered.subject, { maxBytes: total, chunkBytes: CHUNK });
    let consumed = 0;
    let mostAhead = 0;
    for await (const part of stream) {
      consumed += (part as Buffer).length;
      mostAhead = Math.max(mostAhead, made.bytes - consumed);
      // A slow consumer: each chunk waits for a round trip of its own to the server.
      await receiver.flush();
    }
    await offered.done;
    expect(consumed).toBe(total);
    // Without backpressure the sender would run megabytes ahead of this consumer.
    expect(mostAhead).toBeLessThanOrEqual(5 * CHUNK);
    expect(stream.maxBufferedBytes).toBeLessThanOrEqual(2 * CHUNK);
  });

  it('stops the sender and destroys its source when the receiver gives up', async () => {
    const { source, made } = lazySource(64 * 1024 * 1024);
    const offered = await offer(source, { chunkBytes: CHUNK });
    const stream = pullByteStream(receiver, offered.subject, { maxBytes: 64 * 1024 * 1024, chunkBytes: CHUNK });
    for await (const _part of stream) break; // destroys the stream after one chunk
    await expect(offered.done).rejects.toThrow('cancelled');
    expect(made.destroyed).toBe(true);
    expect(made.bytes).toBeLessThan(1024 * 1024);
  });

  it('stops the sender when the receiver goes silent, after the chunk time limit', async () => {
    const { source, made } = lazySource(1024 * 1024);
    const offered = await offer(source, { chunkBytes: CHUNK, chunkTimeoutMs: 300 });
    await expect(offered.done).rejects.toThrow(ByteStreamError);
    expect(made.destroyed).toBe(true);
  });

  it('tells the receiver why the sender aborted', async () => {
    const { source } = lazySource(1024 * 1024);
    const offered = await offer(source, { chunkBytes: CHUNK });
    const stream = pullByteStream(receiver, offered.subject, { maxBytes: 1024 * 1024, chunkBytes: CHUNK });
    offered.abort('the tar held a refused entry');
    await expect(
      (async () => {
        for await (const _part of stream) {
          // drain
        }
      })(),
    ).rejects.toThrow('the tar held a refused entry');
  });

  it('fails a stream that goes over the receiver’s limit', async () => {
    const { source } = lazySource(1024 * 1024);
    const offered = await offer(source, { chunkBytes: CHUNK });
    const stream = pullByteStream(receiver, offered.subject, { maxBytes: 100_000, chunkBytes: CHUNK });
    await expect(
      (async () => {
        for await (const _part of stream) {
          // drain
        }
      })(),
    ).rejects.toThrow('over its 100000-byte limit');
    await expect(offered.done).rejects.toThrow('cancelled');
  });
});
