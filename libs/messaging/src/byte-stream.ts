import { createInbox, NatsConnection, Subscription } from 'nats';
import { Readable } from 'node:stream';
import { z } from 'zod';

/**
 * A stream of bytes of any length over NATS, pulled by the receiver one chunk at a time:
 * the streaming sibling of large-message.ts, for file transfers that must never be held
 * whole in memory on either side.
 *
 * The sender offers a Readable on a private inbox subject and sends that subject in its
 * message. The receiver gets a Readable whose every `_read` asks for the next chunk, so the
 * sender reads its source only as fast as the receiver's consumer drains: at most one chunk
 * is on the wire and one buffered on each side. Every pull has a time limit on both sides;
 * a receiver that gives up says so, and a sender that hears nothing for a chunk's time
 * limit stops, destroying its source either way.
 *
 * Each answer is one frame: a kind byte (data, end, error) and its payload.
 */

/**
 * Bytes one chunk carries: close to NATS's default 1 MiB max_payload, since each chunk costs
 * a round trip (a server with a smaller max_payload gets smaller chunks).
 */
export const BYTE_STREAM_CHUNK_BYTES = 960 * 1024;
/** Room in a message for the frame's kind byte and the protocol's own headers. */
const PAYLOAD_HEADROOM_BYTES = 8 * 1024;
/** How long a pull may wait for its chunk, and a sender for the next pull. */
export const BYTE_STREAM_CHUNK_TIMEOUT_MS = 30_000;

const FRAME_DATA = 0;
const FRAME_END = 1;
const FRAME_ERROR = 2;

/** A byte-stream subject is a NATS inbox; anything else in a message is refused by its contract. */
export const byteStreamSubjectSchema = z.string().regex(/^_INBOX\.[A-Za-z0-9]{8,64}$/, 'a byte-stream inbox subject');

const pullSchema = z.union([z.object({ index: z.number().int().min(0) }).strict(), z.object({ cancel: z.literal(true) }).strict()]);

/** The stream could not be carried to its end: the other side failed, gave up or went silent. */
export class ByteStreamError extends Error {}

export interface ByteStreamLimits {
  chunkBytes: number;
  chunkTimeoutMs: number;
}

const DEFAULT_LIMITS: ByteStreamLimits = { chunkBytes: BYTE_STREAM_CHUNK_BYTES, chunkTimeoutMs: BYTE_STREAM_CHUNK_TIMEOUT_MS };

export interface ByteStreamOffer {
  /** The inbox the receiver pulls from: send it in the message that starts the transfer. */
  readonly subject: string;
  /** Resolves once the receiver took the end; rejects when it gave up, went silent, or the source failed. */
  readonly done: Promise<void>;
  /** Ends the offer: the source is destroyed and the receiver's next pull is told `reason`. */
  abort(reason: string): void;
}

/**
 * Offers `source` for pulling. The offer ends when the receiver has the end of the stream,
 * cancels, stops pulling for `chunkTimeoutMs`, or `abort` is called; the source is destroyed
 * unless it was read to its end.
 */
export function offerByteStream(connection: NatsConnection, source: Readable, limits: Partial<ByteStreamLimits> = {}): ByteStreamOffer {
  const { chunkTimeoutMs, ...wanted } = { ...DEFAULT_LIMITS, ...limits };
  const chunkBytes = Math.min(wanted.chunkBytes, (connection.info?.max_payload ?? 1024 * 1024) - PAYLOAD_HEADROOM_BYTES);
  const subject = createInbox();
  const chunks = new ChunkSource(source);
  let next = 0;
  let busy = false;
  let failure: string | undefined;
  let settle!: { resolve: () => void; reject: (err: Error) => void };
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => undefined);

  let timer: NodeJS.Timeout | undefined;
  const watch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => finish(new ByteStreamError(`the receiver pulled nothing for ${chunkTimeoutMs} ms`)), chunkTimeoutMs);
    timer.unref();
  };
  let finished = false;
  const finish = (err?: Error) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    if (!sub.isClosed()) sub.unsubscribe();
    if (err) {
      source.destroy();
      settle.reject(err);
    } else settle.resolve();
  };

  const sub: Subscription = connection.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      const pull = parsePull(msg.data);
      if (!pull) return void msg.respond(frame(FRAME_ERROR, 'a malformed pull'));
      if ('cancel' in pull) return finish(new ByteStreamError('the receiver cancelled the stream'));
      if (failure !== undefined) {
        msg.respond(frame(FRAME_ERROR, failure));
        return finish(new ByteStreamError(failure));
      }
      if (busy || pull.index !== next) return void msg.respond(frame(FRAME_ERROR, `pull ${pull.index} out of order (expected ${next})`));
      busy = true;
      clearTimeout(timer);
      // The patience keeps a slow source (an upload over a slow link) within the receiver's time limit.
      chunks.take(chunkBytes, Math.floor(chunkTimeoutMs / 3)).then(
        (chunk) => {
          busy = false;
          next++;
          if (failure !== undefined) {
            msg.respond(frame(FRAME_ERROR, failure));
            return finish(new ByteStreamError(failure));
          }
          if (chunk === null) {
            msg.respond(frame(FRAME_END));
            return finish();
          }
          msg.respond(frame(FRAME_DATA, chunk));
          watch();
        },
        (readErr: unknown) => {
          busy = false;
          const why = `the source failed: ${readErr instanceof Error ? readErr.message : String(readErr)}`;
          msg.respond(frame(FRAME_ERROR, failure ?? why));
          finish(new ByteStreamError(failure ?? why));
        },
      );
    },
  });
  watch();
  return {
    subject,
    done,
    abort: (reason) => {
      if (finished || failure !== undefined) return;
      failure = reason;
      source.destroy();
      // A pull being answered says why; otherwise the next pull does, or the watch ends it.
      if (!busy) {
        clearTimeout(timer);
        timer = setTimeout(() => finish(new ByteStreamError(reason)), chunkTimeoutMs);
        timer.unref();
      }
    },
  };
}

export interface PullOptions extends Partial<ByteStreamLimits> {
  /** More bytes than this fail the stream (the transfer's cap). */
  maxBytes: number;
}

/**
 * The receiving end of an offer: a Readable that pulls a chunk each time its consumer wants
 * more. Destroying it before the end tells the sender to stop.
 */
export class PulledByteStream extends Readable {
  private index = 0;
  private received = 0;
  private ended = false;
  private readonly timeoutMs: number;
  /** The most bytes this stream held unread at once: what backpressure keeps bounded. */
  maxBufferedBytes = 0;

  constructor(
    private readonly connection: NatsConnection,
    private readonly subject: string,
    private readonly options: PullOptions,
  ) {
    super({ highWaterMark: options.chunkBytes ?? BYTE_STREAM_CHUNK_BYTES });
    this.timeoutMs = options.chunkTimeoutMs ?? BYTE_STREAM_CHUNK_TIMEOUT_MS;
  }

  /** Bytes received so far. */
  get bytesReceived(): number {
    return this.received;
  }

  override _read(): void {
    void this.pull();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.ended) {
      this.ended = true;
      try {
        this.connection.publish(this.subject, new TextEncoder().encode(JSON.stringify({ cancel: true })));
      } catch {
        // A closed connection: the sender's watch ends the offer instead.
      }
    }
    callback(err);
  }

  private async pull(): Promise<void> {
    if (this.ended) return;
    let data: Uint8Array;
    try {
      const reply = await this.connection.request(this.subject, new TextEncoder().encode(JSON.stringify({ index: this.index })), { timeout: this.timeoutMs });
      data = reply.data;
    } catch (err) {
      if (!this.destroyed) this.destroy(new ByteStreamError(`chunk ${this.index} did not arrive: ${err instanceof Error ? err.message : String(err)}`));
      return;
    }
    if (this.destroyed) return;
    const kind = data[0];
    const payload = data.subarray(1);
    if (kind === FRAME_DATA && payload.length > 0) {
      this.index++;
      this.received += payload.length;
      if (this.received > this.options.maxBytes) {
        this.destroy(new ByteStreamError(`the stream went over its ${this.options.maxBytes}-byte limit`));
        return;
      }
      this.push(Buffer.from(payload));
      this.maxBufferedBytes = Math.max(this.maxBufferedBytes, this.readableLength);
      return;
    }
    if (kind === FRAME_END) {
      this.ended = true;
      this.push(null);
      return;
    }
    this.ended = true;
    const why = kind === FRAME_ERROR ? new TextDecoder().decode(payload).slice(0, 1000) : 'a malformed chunk';
    this.destroy(new ByteStreamError(why));
  }
}

/** Starts pulling the stream offered on `subject`. */
export function pullByteStream(connection: NatsConnection, subject: string, options: PullOptions): PulledByteStream {
  return new PulledByteStream(connection, subject, options);
}

/**
 * Reads a Readable a chunk at a time on demand (paused mode), so nothing more than the
 * source's own buffer is read ahead of what was asked for.
 */
class ChunkSource {
  private ended = false;
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly source: Readable) {
    const signal = () => {
      const w = this.wake;
      this.wake = undefined;
      w?.();
    };
    source.on('readable', signal);
    source.on('end', () => {
      this.ended = true;
      signal();
    });
    source.on('error', (err: Error) => {
      this.error = err;
      signal();
    });
    source.on('close', () => {
      if (!this.ended && !this.error) this.error = new Error('the source closed before its end');
      signal();
    });
    // A source that failed or ended before it was offered sends no more events.
    if (source.readableEnded) this.ended = true;
    else if (source.destroyed) this.error = source.errored ?? new Error('the source closed before its end');
  }

  /** Up to `max` bytes: a full chunk, or what came within `patienceMs` once there is some; null at the end. */
  async take(max: number, patienceMs: number): Promise<Buffer | null> {
    const parts: Buffer[] = [];
    let size = 0;
    const started = Date.now();
    for (;;) {
      if (this.error) throw this.error;
      let piece: Buffer | null;
      while (size < max && (piece = this.source.read() as Buffer | null) !== null) {
        if (size + piece.length > max) {
          this.source.unshift(piece.subarray(max - size));
          piece = piece.subarray(0, max - size);
        }
        parts.push(piece);
        size += piece.length;
      }
      if (size >= max || this.ended || this.source.readableEnded) break;
      const waited = Date.now() - started;
      if (size > 0 && waited >= patienceMs) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (size > 0) setTimeout(resolve, patienceMs - waited).unref();
      });
    }
    if (this.error) throw this.error;
    return size === 0 ? null : Buffer.concat(parts, size);
  }
}

function frame(kind: number, payload?: Uint8Array | string): Uint8Array {
  const body = typeof payload === 'string' ? new TextEncoder().encode(payload) : (payload ?? new Uint8Array(0));
  const out = new Uint8Array(body.length + 1);
  out[0] = kind;
  out.set(body, 1);
  return out;
}

function parsePull(data: Uint8Array): z.infer<typeof pullSchema> | null {
  try {
    const parsed = pullSchema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
