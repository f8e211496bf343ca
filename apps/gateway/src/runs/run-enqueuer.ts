import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { RUN_CONSUMER, RUN_STREAM, runQueuedContract } from '@app/contracts';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { randomBytes } from 'node:crypto';
import { StoredTenantTools } from '../tools/tenant-tools';
import { RunLeasesRepository } from './run-leases.repository';
import { RunsRepository, RunView } from './runs.repository';

/** A run handed to its worker as its creation made it. */
export interface CreatedRun {
  /** The queued run as its creation returned it, which the worker need not read. */
  run: RunView;
  /** The tenant's tool configuration, read beside the creation (RunToolSelection.readTenantTools). */
  storedTools?: StoredTenantTools;
}

/** A free worker of this replica, offered to a run that is ready to start (RunWorkers). */
export interface LocalRunStarter {
  /** Whether a worker of this replica is free to take a run now (startHere would take it). */
  canStartHere(): boolean;
  /** Starts the run in a free worker of this replica; false when none is free to take it. */
  startHere(tenantId: string, runId: string, sessionId?: string, created?: CreatedRun): boolean;
}

/**
 * Puts runs on the JetStream work queue: new runs, runs to resume after an approval, the
 * next queued run of a session whose run ended, and runs the supervisor found stranded.
 * A run may end up on the queue twice; the worker's claim on the run's row makes sure only
 * one worker executes it.
 *
 * A new run, and the next run of a session whose run ended, start at once in a free worker
 * of this replica when it has one outside the reserve (docs/tenancy.md): the queue's
 * round trip (publish, acknowledgement, delivery) is most of an idle gateway's pickup time.
 * Such a run has no queue message; if the replica dies, the run's lease lapses and the
 * supervisor's sweep puts it on the queue, as it does for a lost message.
 */
@Injectable()
export class RunEnqueuer implements OnModuleInit {
  private localStarter?: LocalRunStarter;

  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly runs: RunsRepository,
    private readonly leases: RunLeasesRepository,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.ensureQueue();
  }

  /** RunWorkers offers its free workers here once it consumes the queue. */
  startLocallyWith(starter: LocalRunStarter | undefined): void {
    this.localStarter = starter;
  }

  /**
   * Whether a run created now would start in this replica (it has a worker to spare): only
   * then is its tenant's tool configuration worth reading beside its creation, since a run
   * that goes on the queue is listed by whichever worker takes it.
   */
  startsHere(): boolean {
    return this.localStarter?.canStartHere() ?? false;
  }

  /**
   * A run just created: started here when this replica has a worker to spare (from the row
   * its creation returned, and the tool configuration read beside it), else queued. Its
   * queue message has the run's id as its JetStream message id, so a repeated publish is
   * dropped.
   */
  async enqueueCreated(run: RunView, storedTools?: StoredTenantTools): Promise<void> {
    if (this.localStarter?.startHere(run.tenantId, run.id, run.sessionId, { run, storedTools })) return;
    await this.publish(run.tenantId, run.id, run.id, run.sessionId);
  }

  /**
   * Queues the run again (each message with an id of its own). `sessionId`, the run's
   * session when the caller has it at hand, goes with the message. A session's next run
   * starts here instead when this replica has a worker to spare.
   */
  async enqueue(tenantId: string, runId: string, reason: 'approval' | 'session_free' | 'stranded' | 'handover', sessionId?: string): Promise<void> {
    if (reason === 'session_free' && this.localStarter?.startHere(tenantId, runId, sessionId)) return;
    await this.leases.markDispatched(tenantId, runId);
    await this.publish(tenantId, runId, `${runId}.${reason}.${randomBytes(6).toString('hex')}`, sessionId);
  }

  /** Re-queues a stranded run unless another replica's sweep did so since `seenDispatchedAt`. */
  async requeue(tenantId: string, runId: string, seenDispatchedAt: Date | null): Promise<boolean> {
    if (!(await this.leases.markDispatched(tenantId, runId, seenDispatchedAt))) return false;
    await this.publish(tenantId, runId, `${runId}.stranded.${randomBytes(6).toString('hex')}`);
    return true;
  }

  /** After a run of the session ended: start the oldest run queued behind it. */
  async startNextInSession(tenantId: string, sessionId: string): Promise<void> {
    const next = await this.runs.nextQueued(tenantId, sessionId);
    if (next) await this.enqueue(tenantId, next.id, 'session_free', sessionId);
  }

  private async publish(tenantId: string, runId: string, msgID: string, sessionId?: string): Promise<void> {
    await this.nats.publishToStream(runQueuedContract, { tenant_id: tenantId, run_id: runId, ...(sessionId ? { session_id: sessionId } : {}) }, msgID);
  }

  /**
   * The stream and its one durable consumer. The consumer's ack wait is the run lease, so a
   * message whose worker stopped heartbeating comes back when its claim on the run lapses.
   */
  private async ensureQueue(): Promise<void> {
    await this.nats.ensureWorkQueue(runQueuedContract, {
      stream: RUN_STREAM,
      consumer: RUN_CONSUMER,
      ackWaitMs: this.config.RUNBOX_RUN_LEASE_SECONDS * 1000,
      duplicateWindowMs: 120_000,
      replicas: this.config.RUNBOX_NATS_STREAM_REPLICAS,
    });
  }
}
