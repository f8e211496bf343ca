import { connect, ErrorCode as NatsErrorCode, NatsConnection, NatsError, Subscription } from 'nats';
import type { Logger } from 'pino';
import { ZodType } from 'zod';
import { jsonCodec as codec } from './json-codec';

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

  async request<Req, Rep>(
    subject: string,
    requestSchema: ZodType<Req>,
    payload: unknown,
    replySchema: ZodType<Rep>,
    timeoutMs: number,
  ): Promise<Rep> {
    const body = requestSchema.parse(payload);
    try {
      const msg = await this.connection.request(subject, codec.encode(body), { timeout: timeoutMs });
      return replySchema.parse(codec.decode(msg.data));
    } catch (err) {
      if (err instanceof NatsError && (err.code === NatsErrorCode.Timeout || err.code === NatsErrorCode.NoResponders)) {
        throw new NatsTimeoutError(subject, err.code === NatsErrorCode.NoResponders);
      }
      throw err;
    }
  }

  publish<T>(subject: string, schema: ZodType<T>, payload: unknown): void {
    this.connection.publish(subject, codec.encode(schema.parse(payload)));
  }

  /** Answers requests on `subject`; with a queue group, one member of the group gets each. */
  serve<T>(subject: string, schema: ZodType<T>, handler: RequestHandler<T>, queue?: string): Subscription {
    const sub = this.connection.subscribe(subject, { queue });
    void (async () => {
      for await (const msg of sub) {
        void this.dispatch(subject, schema, handler, msg.data).then((reply) => {
          if (msg.reply) msg.respond(codec.encode(reply));
        });
      }
    })();
    return sub;
  }

  private async dispatch<T>(subject: string, schema: ZodType<T>, handler: RequestHandler<T>, data: Uint8Array): Promise<unknown> {
    let payload: unknown;
    try {
      payload = codec.decode(data);
    } catch {
      this.logger.warn({ subject }, 'dropped a message that is not JSON');
      return { ok: false, error: { code: 'bad_request', message: 'payload is not JSON' } };
    }
    const parsed = schema.safeParse(payload);
    if (!parsed.success) {
      this.logger.warn({ subject, issues: parsed.error.issues.length }, 'rejected an invalid message');
      return { ok: false, error: { code: 'bad_request', message: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') } };
    }
    try {
      return await handler(parsed.data);
    } catch (err) {
      this.logger.error({ subject, err }, 'handler failed');
      return { ok: false, error: { code: 'internal_error', message: 'the handler failed' } };
    }
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
