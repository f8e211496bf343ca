import { Inject, Injectable } from '@nestjs/common';
import { runEventNoticeContract, runEventsSubject } from '@app/contracts';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { NewEvent } from './run-tx';
import { RunEventsRead, RunEventsRepository } from './run-events.repository';

/**
 * A run's events: stored in Postgres (the run's row lock numbers them without gaps, across
 * replicas), then announced on NATS so live streams on any replica wake at once.
 */
@Injectable()
export class RunEventsService {
  constructor(
    private readonly runs: RunEventsRepository,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
  ) {}

  /** Stores and announces events, unless the run has ended. */
  async emit(tenantId: string, runId: string, ...events: NewEvent[]): Promise<void> {
    this.announce(runId, await this.runs.appendEvents(tenantId, runId, events));
  }

  /** Tells live streams that events up to the last of `seqs` were stored. */
  announce(runId: string, seqs: number[] | null | undefined): void {
    if (!seqs || seqs.length === 0) return;
    this.nats.publish(runEventNoticeContract, { run_id: runId, seq: seqs[seqs.length - 1] }, runEventsSubject(runId));
  }

  /** The run's status with its events after `seq`, as of one moment; null for a run the tenant does not have. */
  read(tenantId: string, runId: string, seq: number, limit?: number): Promise<RunEventsRead | null> {
    return this.runs.read(tenantId, runId, seq, limit);
  }

  /** Resolves once NATS has every subscription `watch` made so far: later notices reach them. */
  watching(): Promise<void> {
    return this.nats.flush();
  }

  /** Calls `onNotice` whenever the run gets an event, until the subscription is closed. */
  watch(runId: string, onNotice: () => void): { unsubscribe(): void } {
    return this.nats.subscribe(runEventNoticeContract, () => onNotice(), runEventsSubject(runId));
  }
}
