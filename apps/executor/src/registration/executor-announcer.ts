import { ExecutorAnnouncement, executorAnnounceContract, executorPresenceContract, pinnedSubject } from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { SandboxService } from '../sandbox/sandbox.service';

/** What the announcement reads about this executor, each time it is sent. */
export interface AnnouncedState {
  sandboxes: Pick<SandboxService, 'executorId' | 'capacity' | 'occupied' | 'admission'>;
  warmPool: () => number;
}

/**
 * Tells every gateway who this executor is and how much room it has: at start, on every
 * heartbeat, at once when asked (a gateway that just started) and whenever it stops
 * taking new sessions. Gateways place new sessions by it and count an executor lost after
 * three silent heartbeats (docs/scaling.md). It also answers a gateway that asks this
 * executor alone whether it is still there, for as long as the process lives.
 */
export class ExecutorAnnouncer {
  private readonly instance = randomUUID();
  private readonly startedAt = Date.now();
  private timer?: NodeJS.Timeout;
  private present = false;

  constructor(
    private readonly nats: Pick<NatsClient, 'publish' | 'serve'>,
    private readonly state: AnnouncedState,
    private readonly heartbeatMs: number,
    private readonly version: string,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.answerPresence();
    this.announce();
    this.timer ??= setInterval(() => this.announce(), this.heartbeatMs);
    this.timer.unref();
  }

  /** The last heartbeat: gateways notice the silence after three intervals. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Kept through a drain (until the connection closes), unlike the tool-call subjects, and
   * made before them: whenever this process holds a call, a gateway asking for it finds it,
   * however slow it is to answer, so only a process that is gone is taken for gone.
   */
  answerPresence(): void {
    if (this.present) return;
    this.present = true;
    const executorId = this.state.sandboxes.executorId;
    this.nats.serve(executorPresenceContract, () => Promise.resolve(this.current()), {
      subject: pinnedSubject(executorPresenceContract.subject, executorId),
      responderId: executorId,
      untilClosed: true,
    });
  }

  announce(): void {
    try {
      this.nats.publish(executorAnnounceContract, this.current());
    } catch (err) {
      // NATS away: the connection reconnects on its own, and the next heartbeat goes out then.
      this.logger.warn({ err }, 'announcing this executor failed');
    }
  }

  current(): ExecutorAnnouncement {
    const { sandboxes } = this.state;
    return {
      executor_id: sandboxes.executorId,
      instance: this.instance,
      started_at: this.startedAt,
      capacity: sandboxes.capacity,
      sandboxes: sandboxes.occupied,
      warm_pool: this.state.warmPool(),
      version: this.version,
      state: sandboxes.admission,
      heartbeat_ms: this.heartbeatMs,
    };
  }
}
