import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RUN_CONSUMER, RUN_QUEUE_SUBJECT, RUN_STREAM, runQueuedSchema } from '@app/contracts';
import { LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { AckPolicy, ConsumerMessages, JSONCodec, JsMsg, RetentionPolicy, StorageType } from 'nats';
import type { Logger } from 'pino';
import { RunLoop } from './run-loop';
import { RunsRepository } from './runs.repository';

const codec = JSONCodec<unknown>();
/** A worker that stops reporting progress for this long is presumed dead; the run is redelivered. */
const ACK_WAIT_MS = 30_000;
const HEARTBEAT_MS = 10_000;
const MAX_CONCURRENT_RUNS = 32;

/**
 * The durable run queue. POST /v1/runs publishes a run id to a JetStream work-queue
 * stream; every gateway replica pulls from one shared consumer, so whichever is free takes
 * the run. The message stays unacknowledged while the run goes on (a heartbeat extends it),
 * so a replica that dies mid-run lets JetStream hand the run to another.
 */
@Injectable()
export class RunQueue implements OnApplicationBootstrap, OnApplicationShutdown {
  private messages?: ConsumerMessages;
  private readonly active = new Map<string, AbortController>();

  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    private readonly loop: RunLoop,
    private readonly runs: RunsRepository,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.ensureStream();
    const consumer = await this.nats.connection.jetstream().consumers.get(RUN_STREAM, RUN_CONSUMER);
    this.messages = await consumer.consume({ max_messages: MAX_CONCURRENT_RUNS });
    void (async () => {
      for await (const msg of this.messages!) void this.handle(msg);
    })();
  }

  async enqueue(tenantId: string, runId: string): Promise<void> {
    await this.nats.connection.jetstream().publish(RUN_QUEUE_SUBJECT, codec.encode(runQueuedSchema.parse({ tenant_id: tenantId, run_id: runId })), {
      msgID: runId, // JetStream drops a duplicate publish of the same run
    });
  }

  /** Aborts the run if this replica is executing it. */
  abort(runId: string): boolean {
    const controller = this.active.get(runId);
    controller?.abort();
    return controller !== undefined;
  }

  async onApplicationShutdown(): Promise<void> {
    for (const c of this.active.values()) c.abort();
    await this.messages?.close();
  }

  private async handle(msg: JsMsg): Promise<void> {
    const parsed = runQueuedSchema.safeParse(safeDecode(msg.data));
    if (!parsed.success) {
      this.logger.warn('dropped an invalid run-queue message');
      msg.term();
      return;
    }
    const { tenant_id: tenantId, run_id: runId } = parsed.data;
    const heartbeat = setInterval(() => msg.working(), HEARTBEAT_MS);
    const controller = new AbortController();
    this.active.set(runId, controller);
    try {
      const run = await this.runs.find(tenantId, runId);
      if (run) await this.loop.execute(run, controller.signal);
      msg.ack();
    } catch (err) {
      this.logger.error({ err, runId }, 'run worker failed; the run will be redelivered');
      msg.nak(5_000);
    } finally {
      clearInterval(heartbeat);
      this.active.delete(runId);
    }
  }

  private async ensureStream(): Promise<void> {
    const jsm = await this.nats.connection.jetstreamManager();
    try {
      await jsm.streams.info(RUN_STREAM);
    } catch {
      await jsm.streams.add({
        name: RUN_STREAM,
        subjects: [RUN_QUEUE_SUBJECT],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: 120 * 1_000_000_000,
      });
    }
    try {
      await jsm.consumers.info(RUN_STREAM, RUN_CONSUMER);
    } catch {
      await jsm.consumers.add(RUN_STREAM, {
        durable_name: RUN_CONSUMER,
        ack_policy: AckPolicy.Explicit,
        ack_wait: ACK_WAIT_MS * 1_000_000,
        max_deliver: -1,
      });
    }
  }
}

function safeDecode(data: Uint8Array): unknown {
  try {
    return codec.decode(data);
  } catch {
    return undefined;
  }
}
