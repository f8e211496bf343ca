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
  private readonly waiting = new Set<() => void>();

  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    private readonly registry: ExecutorRegistry,
  ) {}

  onModuleInit(): void {
    this.subscriptions.push(
      this.nats.subscribe(executorAnnounceContract, (announcement) => {
        if (!this.registry.heard(announcement)) return;
        for (const wake of this.waiting) wake();
        this.waiting.clear();
      }),
      this.nats.subscribe(executorDecommissionContract, (message) => this.registry.decommission(message.executor_id, message.at)),
    );
    this.discover();
  }

  onModuleDestroy(): void {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
    for (const wake of this.waiting) wake();
  }

  /** Asks every executor to announce itself now. */
  discover(): void {
    this.nats.publish(executorDiscoverContract, { asked_at: Date.now() });
  }

  /** Resolves at the next announcement, or after `timeoutMs` (whichever comes first). */
  nextAnnouncement(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const waiting = this.waiting;
      function done(): void {
        clearTimeout(timer);
        waiting.delete(done);
        resolve();
      }
      waiting.add(done);
    });
  }

  /** Tells every gateway and the executor itself that the executor is decommissioned. */
  decommission(executorId: string): void {
    const at = Date.now();
    this.registry.decommission(executorId, at);
    this.nats.publish(executorDecommissionContract, { executor_id: executorId, at });
  }
}
