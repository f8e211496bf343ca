import { connect, ErrorCode as NatsErrorCode, JSONCodec, Msg, NatsConnection, NatsError, Subscription } from 'nats';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ZodType } from 'zod';
import { fetchLargeMessage, isLargeMessageEnvelope, LargeMessageError, offerLargeMessage } from './large-message';

const codec = JSONCodec<unknown>();

/**
 * Room left under the server's max_payload for what NATS adds to a payload (headers). Our
 * messages carry none today; the margin keeps a bound that holds if one is added.
 */
const PAYLOAD_HEADROOM_BYTES = 4 * 1024;

/** What the nats client assumes before the server's INFO arrives; the servers' default too. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** How long a large reply stays on offer for the caller to fetch. */
const REPLY_OFFER_MS = 60_000;

/** A reply for a request that could not be handled; each subject shapes it for its reply schema. */
export type ErrorReply = (error: { code: string; message: string }) => unknown;

export interface ServeOptions {
  /** With a queue group, one member of the group gets each request. */
  queue?: string;
  /** Shapes the adapter's own error replies (bad JSON, invalid request, handler failure). */
  errorReply?: ErrorReply;
}

const plainErrorReply: ErrorReply = (error) => ({ ok: false, error });

/** No responder, or none in time: the caller cannot know whether the work happened. */
export class NatsTimeoutError extends Error {
  constructor(
    readonly subject: string,
    readonly noResponders: boolean,
  ) {
    super(noResponders ? `nobody is listening on ${subject}` : `no reply on ${subject} in time`);
  }
}

export type RequestHandler<T> = (payload: T) => Promise<unknown>;

/**
 * The one place that talks to NATS. Every payload is validated with its contract's schema
 * on the way out and on the way in; an invalid message is answered with an error and logged,
 * never handed to a handler.
 */
export class NatsClient {
  private constructor(
    readonly connection: NatsConnection,
    private readonly logger: Logger,
  ) {}

  static async connect(url: string, name: string, logger: Logger): Promise<NatsClient> {
    const connection = await connect({
      servers: url,
      name,
      // Keep trying forever: a NATS restart must not take the service down with it.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    return new NatsClient(connection, logger);
  }

  /**
   * Bytes one message may carry: the server's max_payload, as this connection's server
   * announced it, less room for headers. Read per message, since a reconnect may land on a
   * server with another limit.
   */
  get messageLimitBytes(): number {
    return (this.connection.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) - PAYLOAD_HEADROOM_BYTES;
  }

  /**
   * Sends a request and returns its validated reply. A request or reply over
   * `messageLimitBytes` travels in pieces (large-message.ts), up to MAX_LARGE_MESSAGE_BYTES.
   */
  async request<Req, Rep>(
    subject: string,
    requestSchema: ZodType<Req>,
    payload: unknown,
    replySchema: ZodType<Rep>,
    timeoutMs: number,
  ): Promise<Rep> {
    const body = this.encode(requestSchema.parse(payload), timeoutMs);
    try {
      const msg = await this.connection.request(subject, body, { timeout: timeoutMs });
      return replySchema.parse(codec.decode(await this.whole(msg.data)));
    } catch (err) {
      if (err instanceof NatsError && (err.code === NatsErrorCode.Timeout || err.code === NatsErrorCode.NoResponders)) {
        throw new NatsTimeoutError(subject, err.code === NatsErrorCode.NoResponders);
      }
      throw err;
    }
  }

  /** Fire and forget; a payload over `messageLimitBytes` is refused (nobody would fetch its pieces). */
  publish<T>(subject: string, schema: ZodType<T>, payload: unknown): void {
    const body = codec.encode(schema.parse(payload));
    if (body.length > this.messageLimitBytes) {
      throw new LargeMessageError(`a ${body.length}-byte message on ${subject} is over the ${this.messageLimitBytes}-byte message limit`);
    }
    this.connection.publish(subject, body);
  }

  /**
   * Answers requests on `subject`. Every request gets exactly one reply: the handler's, or
   * an error shaped by `errorReply` when the request was invalid, the handler threw, or the
   * reply could not be sent.
   */
  serve<T>(subject: string, schema: ZodType<T>, handler: RequestHandler<T>, options: ServeOptions = {}): Subscription {
    const errorReply = options.errorReply ?? plainErrorReply;
    return this.connection.subscribe(subject, {
      queue: options.queue,
      callback: (err, msg) => {
        if (err) {
          this.logger.error({ subject, err }, 'subscription failed');
          return;
        }
        void this.dispatch(subject, schema, handler, errorReply, msg.data).then((reply) => this.answer(subject, msg, reply, errorReply));
      },
    });
  }

  /** Waits until the server has seen everything sent so far (subscriptions included). */
  async flush(): Promise<void> {
    await this.connection.flush();
  }

  private async dispatch<T>(subject: string, schema: ZodType<T>, handler: RequestHandler<T>, errorReply: ErrorReply, data: Uint8Array): Promise<unknown> {
    let payload: unknown;
    try {
      payload = codec.decode(await this.whole(data));
    } catch (err) {
      if (err instanceof LargeMessageError) {
        this.logger.warn({ subject, reason: err.message }, 'dropped a large message that could not be assembled');
        return errorReply({ code: 'bad_request', message: err.message });
      }
      this.logger.warn({ subject }, 'dropped a message that is not JSON');
      return errorReply({ code: 'bad_request', message: 'payload is not JSON' });
    }
    const parsed = schema.safeParse(payload);
    if (!parsed.success) {
      this.logger.warn({ subject, issues: parsed.error.issues.length }, 'rejected an invalid message');
      return errorReply({ code: 'bad_request', message: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') });
    }
    try {
      return await handler(parsed.data);
    } catch (err) {
      const errorId = randomUUID();
      this.logger.error({ subject, err, errorId }, 'handler failed');
      return errorReply({ code: 'internal_error', message: `the handler failed (error id ${errorId})` });
    }
  }

  /**
   * Sends a reply; when that fails (the reply cannot be encoded, the connection refused it),
   * sends the error reply instead, so the caller hears of it now rather than at its timeout.
   */
  private answer(subject: string, msg: Msg, reply: unknown, errorReply: ErrorReply): void {
    if (!msg.reply) return;
    try {
      msg.respond(this.encode(reply, REPLY_OFFER_MS));
    } catch (err) {
      const errorId = randomUUID();
      this.logger.error({ subject, err, errorId }, 'a reply could not be sent; answering with an error');
      try {
        msg.respond(codec.encode(errorReply({ code: 'reply_failed', message: `the reply could not be sent (error id ${errorId})` })));
      } catch (again) {
        this.logger.error({ subject, err: again, errorId }, 'the error reply could not be sent either');
      }
    }
  }

  /** JSON bytes, or an envelope for them when they are over the message limit. */
  private encode(value: unknown, offerMs: number): Uint8Array {
    const bytes = codec.encode(value);
    const limit = this.messageLimitBytes;
    if (bytes.length <= limit) return bytes;
    return offerLargeMessage(this.connection, bytes, { chunkBytes: limit, offerMs });
  }

  /** The message itself, fetched piece by piece when `data` is an envelope for it. */
  private async whole(data: Uint8Array): Promise<Uint8Array> {
    return isLargeMessageEnvelope(data) ? fetchLargeMessage(this.connection, data) : data;
  }

  /**
   * Drains (lets in-flight handlers answer), then closes. With the server away, drain()
   * would wait for it to come back for ever, so it gets a bound and the connection is then
   * closed as it is: a service stopping while NATS is down still stops.
   */
  async close(drainMs = 3_000): Promise<void> {
    if (this.connection.isClosed()) return;
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, drainMs);
    });
    await Promise.race([this.connection.drain().catch(() => undefined), gaveUp]);
    clearTimeout(timer);
    // A drain that gave up, or one that "finished" while disconnected, leaves the connection
    // open and reconnecting: close it.
    if (!this.connection.isClosed()) await this.connection.close();
  }
}
