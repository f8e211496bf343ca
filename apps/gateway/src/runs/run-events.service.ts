import { Inject, Injectable } from '@nestjs/common';
import { runEventNoticeSchema, runEventsSubject } from '@app/contracts';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { Subscription } from 'nats';
import { RunEventView, RunsRepository } from './runs.repository';

/**
 * Stores a run's events and tells live streams about them. Appends for one run are chained,
 * so concurrent tool calls cannot race for the same sequence number.
 */
@Injectable()
export class RunEventsService {
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(
    private readonly runs: RunsRepository,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
  ) {}

  emit(tenantId: string, runId: string, type: string, data: Record<string, unknown>): Promise<number> {
    const previous = this.chains.get(runId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(async () => {
      const seq = await this.runs.appendEvent(tenantId, runId, type, { run_id: runId, ...data });
      this.nats.publish(runEventsSubject(runId), runEventNoticeSchema, { run_id: runId, seq });
      return seq;
    });
    this.chains.set(runId, next);
    void next.finally(() => {
      if (this.chains.get(runId) === next) this.chains.delete(runId);
    });
    return next;
  }

  after(tenantId: string, runId: string, seq: number): Promise<RunEventView[]> {
    return this.runs.eventsAfter(tenantId, runId, seq);
  }

  /** Calls `onNotice` whenever the run gets an event, until the subscription is closed. */
  watch(runId: string, onNotice: () => void): Subscription {
    return this.nats.connection.subscribe(runEventsSubject(runId), { callback: () => onNotice() });
  }
}
