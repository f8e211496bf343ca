import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { ExecutorAnnouncement, executorAnnounceContract, executorDecommissionContract, executorDiscoverContract, executorPresenceContract, pinnedSubject } from '@app/contracts';
import { NATS_CLIENT, NatsClient, NatsTimeoutError } from '@app/messaging';
import { ExecutorRegistry } from './executor-registry';

/**
 * What asking one executor whether it is still there found:
 * - `answered`: it answered (its announcement is now in the registry);
 * - `connected`: no answer in time, but its process still holds its NATS connection (its
 *   subscription is there): alive and slow, or on a host that vanished without closing the
 *   connection, which NATS notices at its own ping interval;
 * - `gone`: nobody listens for it: its process exited or crashed (NATS dropped its connection).
 */
export type ExecutorPresence = 'answered' | 'connected' | 'gone';

/**
 * Feeds the registry: every executor's announcements and every decommission, as each
 * gateway hears them; at start it asks the executors to announce at once, so a gateway
 * that just started can place a session without waiting a heartbeat.
 */
@Injectable()
export class ExecutorAnnouncements implements OnModuleInit, OnModuleDestroy {
  private readonly subscriptions: Array<{ unsubscribe(): void }> = [];
  /** Waiting for the next announcement, of one executor or (no id) of any. */
  private readonly waiting = new Map<() => void, string | undefined>();

  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    private readonly registry: ExecutorRegistry,
  ) {}

  onModuleInit(): void {
    this.subscriptions.push(
      this.nats.subscribe(executorAnnounceContract, (announcement) => this.heard(announcement)),
      this.nats.subscribe(executorDecommissionContract, (message) => this.registry.decommission(message.executor_id, message.at)),
    );
    this.discover();
  }

  onModuleDestroy(): void {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
    for (const wake of this.waiting.keys()) wake();
  }

  /** Asks every executor to announce itself now. */
  discover(): void {
    this.nats.publish(executorDiscoverContract, { asked_at: Date.now() });
  }

  private heard(announcement: ExecutorAnnouncement): void {
    if (!this.registry.heard(announcement)) return;
    for (const [wake, id] of this.waiting) if (id === undefined || id === announcement.executor_id) wake();
  }

  /**
   * Asks every executor to announce itself and resolves at the next announcement (of
   * `executorId`, or of any), or after `timeoutMs`, whichever comes first.
   */
  askAndWait(timeoutMs: number, executorId?: string): Promise<void> {
    const heard = new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const waiting = this.waiting;
      function done(): void {
        clearTimeout(timer);
        waiting.delete(done);
        resolve();
      }
      waiting.set(done, executorId);
    });
    this.discover();
    return heard;
  }

  /** Asks `executorId` alone whether it is still there; see ExecutorPresence. */
  async presence(executorId: string, timeoutMs: number): Promise<ExecutorPresence> {
    try {
      const reply = await this.nats.request(executorPresenceContract, {}, { timeoutMs, subject: pinnedSubject(executorPresenceContract.subject, executorId) });
      if (!('ok' in reply)) this.heard(reply);
      return 'answered';
    } catch (err) {
      if (err instanceof NatsTimeoutError && err.noResponders) return 'gone';
      // No answer in time, or this gateway's own connection is away: nothing says it is gone.
      return 'connected';
    }
  }

  /** Tells every gateway and the executor itself that the executor is decommissioned. */
  decommission(executorId: string): void {
    const at = Date.now();
    this.registry.decommission(executorId, at);
    this.nats.publish(executorDecommissionContract, { executor_id: executorId, at });
  }
}
