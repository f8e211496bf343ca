import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { executorAnnounceContract, executorDecommissionContract, executorDiscoverContract } from '@app/contracts';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { ExecutorRegistry } from './executor-registry';

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
      this.nats.subscribe(executorAnnounceContract, (announcement) => {
        if (!this.registry.heard(announcement)) return;
        for (const [wake, id] of this.waiting) if (id === undefined || id === announcement.executor_id) wake();
      }),
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

  /** Tells every gateway and the executor itself that the executor is decommissioned. */
  decommission(executorId: string): void {
    const at = Date.now();
    this.registry.decommission(executorId, at);
    this.nats.publish(executorDecommissionContract, { executor_id: executorId, at });
  }
}
