import { EventContract, RequestContract } from '@app/contracts';
import {
  AckPolicy,
  connect,
  Consumer,
  ErrorCode as NatsErrorCode,
  headers as natsHeaders,
  Msg,
  MsgHdrs,
  NatsConnection,
  JetStreamManager,
  NatsError,
  RetentionPolicy,
  StorageType,
  Subscription,
} from 'nats';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { acceptRequestId, currentRequestId, REQUEST_ID_HEADER, withRequestId } from '@app/logging';
import { ZodError, ZodType } from 'zod';
import { isNatsUnavailable } from './nats-unavailable';
import { decodeJson, jsonCodec as codec } from './json-codec';
import { fetchLargeMessage, isLargeMessageEnvelope, LargeMessageError, offerLargeMessage } from './large-message';

/**
 * Room left under the server's max_payload for what NATS adds to a payload: headers, of
 * which ours carry at most the correlation id (MAX_REQUEST_ID_CHARS).
 */
const PAYLOAD_HEADROOM_BYTES = 4 * 1024;

/** What the nats client assumes before the server's INFO arrives; the servers' default too. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** How long a large reply stays on offer for the caller to fetch. */
const REPLY_OFFER_MS = 60_000;

/** No responder, or none in time: the caller cannot know whether the work happened. */
export class NatsTimeoutError extends Error {
  constructor(
    readonly subject: string,
    readonly noResponders: boolean,
  ) {
    super(noResponders ? `nobody is listening on ${subject}` : `no reply on ${subject} in time`);
  }
}

/**
 * A message this side built or received broke its contract: a bug or a version mismatch
 * between services, never the caller's fault, so it must surface as an internal error
 * (a 500 with an error id), not as a validation error naming the caller's input.
 */
export class ContractViolationError extends Error {
  constructor(
    readonly subject: string,
    readonly direction: 'request' | 'reply' | 'event',
    readonly issues: string,
  ) {
    super(`the ${direction} on ${subject} broke its contract: ${issues}`);
  }
}

export type RequestHandler<Req, Rep> = (payload: Req) => Promise<Rep>;

export interface ServeOptions {
  /** With a queue group, one member of the group gets each request. */
  queue?: string;
  /** The subject when it is not the contract's own (a per-executor subject). */
  subject?: string;
  /** Names the responder in its error replies (the executor id). */
  responderId: string;
  /**
   * Keeps answering while the service drains (`stopResponding`), until the connection
   * closes: for a presence probe, whose "no responders" must mean the process is gone.
   */
  untilClosed?: boolean;
}

/** A stream whose one durable consumer hands each message to one worker, with explicit acks. */
export interface WorkQueueOptions {
  stream: string;
  consumer: string;
  /** How long a message may go without an ack or a `working()` before it is handed out again. */
  ackWaitMs: number;
  /** How long a repeated message id is recognised and dropped. */
  duplicateWindowMs: number;
  /** Copies of the stream the servers keep (1 on a single server, 3 in a three-node cluster). */
  replicas: number;
}

/** The work-queue stream exists with another replica count than asked, and the servers would not change it. */
export class StreamReplicasError extends Error {}

/**
 * The one place that talks to NATS. Every message is checked against its subject's
 * contract (libs/contracts) on the way out and on the way in, and bounded in bytes: the
 * server's max_payload per message, the contract's limit per assembled message.
 */
export class NatsClient {
  /** What `respond` subscribed, so a draining service can stop answering before it stops. */
  private readonly responders = new Set<Subscription>();

  private constructor(
    readonly connection: NatsConnection,
    private readonly logger: Logger,
  ) {}

  /** `servers`: one URL, or several (a list, or one string with commas) of one cluster's servers. */
  static async connect(servers: string | string[], name: string, logger: Logger): Promise<NatsClient> {
    const list = (typeof servers === 'string' ? servers.split(',') : servers).map((s) => s.trim()).filter(Boolean);
    const connection = await connect({
      servers: list,
      name,
      // Keep trying forever: a NATS restart must not take the service down with it.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // The client otherwise makes an Error (with its stack) on every request, for the
      // rare timeout's trace: a cost on every tool call for a trace that says little.
      noAsyncTraces: true,
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
   * `messageLimitBytes` travels in pieces (large-message.ts), up to the contract's limit.
   */
  async request<Req, Rep, ReqInput>(contract: RequestContract<Req, Rep, ReqInput>, payload: ReqInput, options: { timeoutMs: number; subject?: string }): Promise<Rep> {
    const subject = options.subject ?? contract.subject;
    const body = this.encode(checked(contract.request, payload, subject, 'request'), contract.maxBytes, options.timeoutMs);
    let data: Uint8Array;
    try {
      const msg = await this.connection.request(subject, body, { timeout: options.timeoutMs, headers: correlationHeaders() });
      data = await this.whole(msg.data, contract.maxBytes);
    } catch (err) {
      if (err instanceof NatsError && (err.code === NatsErrorCode.Timeout || err.code === NatsErrorCode.NoResponders)) {
        throw new NatsTimeoutError(subject, err.code === NatsErrorCode.NoResponders);
      }
      throw err;
    }
    return checked(contract.reply, decode(data, subject), subject, 'reply');
  }

  /** Fire and forget; a payload over `messageLimitBytes` is refused (nobody would fetch its pieces). */
  publish<T>(contract: EventContract<T>, payload: T, subject = contract.subject): void {
    this.connection.publish(subject, this.encodeEvent(contract, payload, subject), { headers: correlationHeaders() });
  }

  /** Calls `onMessage` with every valid message on `subject`; invalid ones are logged and dropped. */
  subscribe<T>(contract: EventContract<T>, onMessage: (payload: T) => void, subject = contract.subject): { unsubscribe(): void } {
    return this.connection.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return;
        const parsed = msg.data.length <= contract.maxBytes ? contract.payload.safeParse(decodeJson(msg.data)) : null;
        if (parsed?.success) withRequestId(requestIdOf(msg.headers), () => onMessage(parsed.data));
        else this.logger.warn({ subject }, 'dropped an invalid message');
      },
    });
  }

  /**
   * Answers requests. Every request gets exactly one reply that satisfies the contract:
   * the handler's, or the contract's error reply when the request was invalid, the handler
   * threw or broke the reply contract, or the reply could not be sent.
   */
  serve<Req, Rep, ReqInput>(contract: RequestContract<Req, Rep, ReqInput>, handler: RequestHandler<Req, Rep>, options: ServeOptions): Subscription {
    const fail = failureFor(contract, options.responderId);
    return this.respond(contract, (payload, subject) => {
      const parsed = contract.request.safeParse(payload);
      if (parsed.success) return handler(parsed.data);
      this.logger.warn({ subject, issues: parsed.error.issues.length }, 'rejected an invalid message');
      return Promise.resolve(fail('bad_request', describeIssues(parsed.error)));
    }, options);
  }

  /**
   * As `serve`, for a handler that validates the request itself (the Nest transport does,
   * with a pipe): it gets the assembled, decoded payload as it came. Its reply is still
   * checked against the contract, and a handler that throws is answered with the error reply.
   */
  respond<Req, Rep, ReqInput>(
    contract: RequestContract<Req, Rep, ReqInput>,
    handler: (payload: unknown, subject: string) => Promise<Rep>,
    options: ServeOptions,
  ): Subscription {
    const subject = options.subject ?? contract.subject;
    const fail = failureFor(contract, options.responderId);
    const subscription = this.connection.subscribe(subject, {
      queue: options.queue,
      callback: (err, msg) => {
        if (err) {
          this.logger.error({ subject, err }, 'subscription failed');
          return;
        }
        // The caller's correlation id, when it sent a well-formed one, goes on every log line
        // the handler writes; a malformed one is ignored (it came from another process).
        void withRequestId(requestIdOf(msg.headers), () => this.dispatch(subject, contract, handler, fail, msg.data)).then((reply) =>
          this.answer(subject, contract, msg, reply, fail),
        );
      },
    });
    if (!options.untilClosed) this.responders.add(subscription);
    return subscription;
  }

  /**
   * Stops answering requests: every subscription `respond` made is drained (requests
   * already delivered are still handled), so callers find "no responders" from here on
   * instead of a responder that is about to go. Events are still received.
   */
  async stopResponding(drainMs = 3_000): Promise<void> {
    const subscriptions = [...this.responders];
    this.responders.clear();
    // With the server away the drain would wait for it for ever; past the bound, the
    // subscriptions are simply dropped (a server that comes back has forgotten them anyway).
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, drainMs)));
    const drained = Promise.all(subscriptions.map((s) => s.drain().catch(() => undefined))).then(() => this.flush().catch(() => undefined));
    await Promise.race([drained, gaveUp]);
    clearTimeout(timer);
    for (const subscription of subscriptions) if (!subscription.isClosed()) subscription.unsubscribe();
  }

  /** Publishes to a JetStream stream; a repeated `msgID` within the stream's window is dropped. */
  async publishToStream<T>(contract: EventContract<T>, payload: T, msgID: string): Promise<void> {
    await this.connection.jetstream().publish(contract.subject, this.encodeEvent(contract, payload, contract.subject), { msgID });
  }

  /**
   * Creates the work-queue stream (with `replicas` copies) and its durable consumer, or brings
   * an existing one up to date: its replica count (the servers move the copies) and the
   * consumer's ack wait. A change the servers refuse (more replicas than the cluster has
   * nodes, or any on a single server) stops the caller with a StreamReplicasError that says so.
   */
  async ensureWorkQueue<T>(contract: EventContract<T>, options: WorkQueueOptions): Promise<void> {
    if (options.replicas > 1 && !this.connection.info?.cluster) {
      throw new StreamReplicasError(
        `RUNBOX_NATS_STREAM_REPLICAS is ${options.replicas}, but the NATS server ${this.connection.getServer()} is not part of a cluster and keeps one copy of a stream: set it to 1, or list the cluster's servers in NATS_URL`,
      );
    }
    const jsm = await this.connection.jetstreamManager();
    const existing = await jsm.streams.info(options.stream).catch((err: unknown) => {
      if (err instanceof NatsError && err.api_error?.err_code === STREAM_NOT_FOUND) return null;
      throw err;
    });
    if (!existing) {
      await this.whilePeersReturn(() =>
        jsm.streams.add({
          name: options.stream,
          subjects: [contract.subject],
          retention: RetentionPolicy.Workqueue,
          storage: StorageType.File,
          duplicate_window: options.duplicateWindowMs * 1_000_000,
          num_replicas: options.replicas,
        }),
      ).catch((err: unknown) => {
        throw new StreamReplicasError(`could not create the stream ${options.stream} with ${options.replicas} replicas (RUNBOX_NATS_STREAM_REPLICAS): ${errorText(err)}`);
      });
    } else if (existing.config.num_replicas !== options.replicas) {
      const had = existing.config.num_replicas;
      await this.whilePeersReturn(() => jsm.streams.update(options.stream, { ...existing.config, num_replicas: options.replicas })).catch((err: unknown) => {
        throw new StreamReplicasError(
          `the stream ${options.stream} has ${had} replicas and RUNBOX_NATS_STREAM_REPLICAS asks for ${options.replicas}, but the servers refused the change: ${errorText(err)}`,
        );
      });
      this.logger.info({ stream: options.stream, from: had, to: options.replicas }, 'changed the stream\'s replica count');
    }
    await this.ensureConsumer(jsm, options);
  }

  /**
   * A stream placement the servers refuse because a peer is offline for the moment (a node
   * restarting, or one the meta leader has not heard from lately) is asked again, for at most
   * STREAM_SETUP_MS; any other refusal (more copies than the cluster has nodes) is final.
   */
  private async whilePeersReturn<T>(place: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + STREAM_SETUP_MS;
    for (;;) {
      try {
        return await place();
      } catch (err) {
        if (!/peer offline/i.test(errorText(err)) || Date.now() >= deadline) throw err;
        this.logger.info({ err: errorText(err) }, 'a NATS peer is offline; placing the run stream again');
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /**
   * The queue's durable consumer, created or with its ack wait brought up to date. Right
   * after the stream was created or its copies changed, the stream may be electing its
   * leader: the consumer API then answers "stream not found" or nothing for a moment, so
   * those answers are asked again, for at most STREAM_SETUP_MS.
   */
  private async ensureConsumer(jsm: JetStreamManager, options: WorkQueueOptions): Promise<void> {
    const ackWait = options.ackWaitMs * 1_000_000;
    const deadline = Date.now() + STREAM_SETUP_MS;
    for (;;) {
      try {
        const info = await jsm.consumers.info(options.stream, options.consumer).catch((err: unknown) => {
          if (err instanceof NatsError && err.api_error?.err_code === CONSUMER_NOT_FOUND) return null;
          throw err;
        });
        if (!info) await jsm.consumers.add(options.stream, { durable_name: options.consumer, ack_policy: AckPolicy.Explicit, ack_wait: ackWait, max_deliver: -1 });
        else if (info.config.ack_wait !== ackWait) await jsm.consumers.update(options.stream, options.consumer, { ack_wait: ackWait });
        return;
      } catch (err) {
        const settling = isNatsUnavailable(err) || (err instanceof NatsError && err.api_error?.err_code === STREAM_NOT_FOUND);
        if (!settling || Date.now() >= deadline) throw err;
        this.logger.info({ stream: options.stream, err: errorText(err) }, 'the run stream is settling; setting up its consumer again');
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** The stream's durable consumer, to pull messages from. */
  consumer(stream: string, name: string): Promise<Consumer> {
    return this.connection.jetstream().consumers.get(stream, name);
  }

  /** Parses a message pulled from a stream against its contract; null when it breaks it. */
  parseEvent<T>(contract: EventContract<T>, data: Uint8Array): T | null {
    if (data.length > contract.maxBytes) return null;
    const parsed = contract.payload.safeParse(decodeJson(data));
    return parsed.success ? parsed.data : null;
  }

  /** Waits until the server has seen everything sent so far (subscriptions included). */
  async flush(): Promise<void> {
    await this.connection.flush();
  }

  /** True when the server answers a round trip. */
  async ping(): Promise<boolean> {
    if (this.connection.isClosed()) return false;
    return this.connection.flush().then(
      () => true,
      () => false,
    );
  }

  private async dispatch<Req, Rep, ReqInput>(
    subject: string,
    contract: RequestContract<Req, Rep, ReqInput>,
    handler: (payload: unknown, subject: string) => Promise<Rep>,
    fail: (code: string, message: string) => Rep,
    data: Uint8Array,
  ): Promise<Rep> {
    let payload: unknown;
    try {
      payload = JSON.parse(new TextDecoder().decode(await this.whole(data, contract.maxBytes)));
    } catch (err) {
      if (err instanceof LargeMessageError) {
        this.logger.warn({ subject, reason: err.message }, 'dropped a large message that could not be assembled');
        return fail('bad_request', err.message);
      }
      this.logger.warn({ subject }, 'dropped a message that is not JSON');
      return fail('bad_request', 'payload is not JSON');
    }
    try {
      return await handler(payload, subject);
    } catch (err) {
      const errorId = randomUUID();
      this.logger.error({ subject, err, errorId }, 'handler failed');
      return fail('internal_error', `the handler failed (error id ${errorId})`);
    }
  }

  /**
   * Sends a reply after checking it against the contract; when it breaks the contract or
   * cannot be sent, sends the error reply instead, so the caller hears of it now rather
   * than at its timeout.
   */
  private answer<Req, Rep, ReqInput>(subject: string, contract: RequestContract<Req, Rep, ReqInput>, msg: Msg, reply: Rep, fail: (code: string, message: string) => Rep): void {
    if (!msg.reply) return;
    try {
      msg.respond(this.encode(checked(contract.reply, reply, subject, 'reply'), contract.maxBytes, REPLY_OFFER_MS));
    } catch (err) {
      const errorId = randomUUID();
      this.logger.error({ subject, err, errorId }, 'a reply could not be sent; answering with an error');
      try {
        msg.respond(codec.encode(fail('reply_failed', `the reply could not be sent (error id ${errorId})`)));
      } catch (again) {
        this.logger.error({ subject, err: again, errorId }, 'the error reply could not be sent either');
      }
    }
  }

  /** JSON bytes, or an envelope for them when they are over the message limit. */
  private encode(value: unknown, maxBytes: number, offerMs: number): Uint8Array {
    const bytes = codec.encode(value);
    const limit = this.messageLimitBytes;
    if (bytes.length <= limit) return bytes;
    return offerLargeMessage(this.connection, bytes, { chunkBytes: limit, offerMs, maxBytes });
  }

  private encodeEvent<T>(contract: EventContract<T>, payload: T, subject: string): Uint8Array {
    const body = codec.encode(checked(contract.payload, payload, subject, 'event'));
    const limit = Math.min(this.messageLimitBytes, contract.maxBytes);
    if (body.length > limit) throw new LargeMessageError(`a ${body.length}-byte message on ${subject} is over its ${limit}-byte limit`);
    return body;
  }

  /** The message itself, fetched piece by piece when `data` is an envelope for it. */
  private async whole(data: Uint8Array, maxBytes: number): Promise<Uint8Array> {
    return isLargeMessageEnvelope(data) ? fetchLargeMessage(this.connection, data, maxBytes) : data;
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

/** JetStream's error codes for "stream not found" and "consumer not found". */
const STREAM_NOT_FOUND = 10059;
const CONSUMER_NOT_FOUND = 10014;
/** How long the run stream's setup waits out a peer that is away or a stream electing its leader. */
const STREAM_SETUP_MS = 15_000;

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The current correlation id as NATS headers, or none. */
function correlationHeaders(): MsgHdrs | undefined {
  const requestId = currentRequestId();
  if (!requestId) return undefined;
  const headers = natsHeaders();
  headers.set(REQUEST_ID_HEADER, requestId);
  return headers;
}

function requestIdOf(headers: MsgHdrs | undefined): string | undefined {
  return acceptRequestId(headers?.get(REQUEST_ID_HEADER));
}

/** `value` parsed by `schema`; a failure is this side's bug, raised as a ContractViolationError. */
function checked<T>(schema: ZodType<T>, value: unknown, subject: string, direction: 'request' | 'reply' | 'event'): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ContractViolationError(subject, direction, describeIssues(parsed.error));
  return parsed.data;
}

function decode(data: Uint8Array, subject: string): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    throw new ContractViolationError(subject, 'reply', 'not JSON');
  }
}

function failureFor<Rep>(contract: RequestContract<unknown, Rep, unknown>, responderId: string): (code: string, message: string) => Rep {
  return (code, message) => contract.errorReply({ code, message }, responderId);
}

/** A zod error as one line naming each field and what is wrong with it. */
export function describeIssues(error: ZodError): string {
  return error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
}
