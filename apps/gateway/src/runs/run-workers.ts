import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { RUN_CONSUMER, RUN_STREAM, runCancelContract, RunQueued, runQueuedContract } from '@app/contracts';
import { LOGGER } from '@app/logging';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { ConsumerMessages, JsMsg } from 'nats';
import type { Logger } from 'pino';
import { abortableDelay, RunAbort } from './run-abort';
import { isTransientInfrastructureError } from './run-context';
import { StoredTenantTools } from '../tools/tenant-tools';
import { CreatedRun, LocalRunStarter, RunEnqueuer } from './run-enqueuer';
import { ExecuteOptions, RunLoop, RunOutcome } from './run-loop';
import { RunToolSelection } from './run-tools';
import { ClaimOutcome, RunLeasesRepository } from './run-leases.repository';
import { RunView } from './runs.repository';
import { belowFairShare, reservedWorkers, takesFromReserve, WorkerHolds } from './worker-share';

/** How long one read of the deployment's worker holds serves the fairness decisions. */
const HOLDS_TTL_MS = 250;
/**
 * A run that yielded its worker to other tenants waits this long, longer with each
 * delivery, up to 5 s: parked here (see `park`), or back on the queue when the replica
 * already parks as many runs as it reserves workers.
 */
const YIELD_RETRY_STEP_MS = 500;
const YIELD_RETRY_MAX_MS = 5_000;

/** Outages one claim rides out before the run goes back to the queue (a fault that keeps recurring is not an outage). */
const MAX_OUTAGES_PER_CLAIM = 10;
/** The longest pause between tries to take a run up again while the database is away. */
const RECLAIM_RETRY_MAX_MS = 1_000;

/** A run this worker has claimed. */
interface ClaimedWork {
  tenantId: string;
  runId: string;
  owner: string;
  controller: AbortController;
  log: Logger;
  /** The session's tenant tools, listed beside the claim (for the first execution only). */
  tenantTools?: ExecuteOptions['tenantTools'];
}

/**
 * How a run reached its worker: a queue message, or handed over by this replica as the run
 * became ready (`startHere`). The worker acknowledges it when done with the run, or hands
 * it back to the queue.
 */
interface RunDelivery {
  tenantId: string;
  runId: string;
  sessionId?: string;
  /** 1 the first time: the pause before a retry after a failure grows with it. */
  deliveryCount: number;
  /** Done with the run: it ended or waits, or another worker has it. */
  ack(): void;
  /** Back to the queue, after `delayMs` when given. */
  nak(delayMs?: number): void;
  /** The run goes on (a message's ack wait starts again). */
  working(): void;
  /** The queued run as its creation returned it: claiming a queued run only reads it, so it is not read again. */
  created?: RunView;
  /** The tenant's tool configuration, read beside the run's creation. */
  storedTools?: StoredTenantTools;
}

/** A run that yielded a reserved worker and waits here for one outside the reserve. */
interface ParkedRun {
  msg: JsMsg;
  queued: RunQueued;
  /** Puts the message back on the queue when the wait is over. */
  timer: NodeJS.Timeout;
}

/** How executing a sub-run in its parent's worker went; `held`: another worker has it now. */
export type InlineOutcome = RunOutcome | 'held';

/**
 * The gateway's run workers. Every replica pulls from one durable JetStream consumer; a
 * worker that takes a message first claims the run's row (a lease in Postgres, renewed with
 * each heartbeat), so a run is executed by one worker at a time even when it is on the
 * queue twice. While the run goes on the message stays unacknowledged and is kept alive
 * with `working()`; if the replica dies, heartbeats stop, the message comes back after the
 * lease time and another worker takes over from the state stored in Postgres.
 *
 * Workers are shared fairly between tenants (worker-share.ts): the last few free workers
 * go only to tenants below their share of the deployment, counted from the live leases in
 * Postgres, so a run of a tenant that holds more waits (parked here, or back on the queue)
 * and another tenant's run behind it gets the worker.
 */
@Injectable()
export class RunWorkers implements OnApplicationBootstrap, BeforeApplicationShutdown, LocalRunStarter {
  /** This process's name; each claim adds its own suffix. */
  readonly workerId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private messages?: ConsumerMessages;
  private cancelSubscription?: { unsubscribe(): void };
  private readonly active = new Map<string, AbortController>();
  private readonly handlers = new Set<Promise<void>>();
  private free: number;
  private slotWaiters: Array<() => void> = [];
  private stopping = false;
  /** Runs of each tenant this replica's workers hold now (exact, unlike the read of the others). */
  private readonly heldHere = new Map<string, number>();
  /** The last read of what other replicas hold. */
  private elsewhere?: { readAt: number; holds: WorkerHolds };
  /** Runs that yielded a reserved worker, oldest first; a freed worker goes to them first. */
  private readonly parked: ParkedRun[] = [];
  private offeringParked = false;
  private offerAgain = false;
  /**
   * Runs a function in the async context the workers started in. A run started here begins
   * inside whatever made it ready (a request, another run's completion), whose context is
   * not the run's: a tenant transaction scope there would take the run's statements in.
   */
  private outsideCaller: <R>(fn: () => R) => R = (fn) => fn();

  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly loop: RunLoop,
    private readonly runs: RunLeasesRepository,
    private readonly toolSelection: RunToolSelection,
    private readonly enqueuer: RunEnqueuer,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.free = config.RUNBOX_RUN_WORKERS;
  }

  private get leaseMs(): number {
    return this.config.RUNBOX_RUN_LEASE_SECONDS * 1000;
  }

  async onApplicationBootstrap(): Promise<void> {
    this.cancelSubscription = this.nats.subscribe(runCancelContract, (msg) => this.abort(msg.run_id, 'cancel'));
    const consumer = await this.nats.consumer(RUN_STREAM, RUN_CONSUMER);
    // A small prefetch: messages waiting in one replica's buffer are not available to others.
    this.messages = await consumer.consume({ max_messages: 2 });
    void this.pull(this.messages);
    this.outsideCaller = AsyncLocalStorage.snapshot();
    this.enqueuer.startLocallyWith(this);
  }

  /** A worker outside the reserve is free (startHere takes only such a worker). */
  canStartHere(): boolean {
    return !this.stopping && this.free > 0 && !takesFromReserve(this.free - 1, this.config.RUNBOX_RUN_WORKERS);
  }

  /**
   * Starts a run that has just become ready (made, or next in its session) in a free worker
   * of this replica, without the queue's round trip. Only a worker outside the reserve is
   * taken: a reserved one goes by the fairness rule, which reads the deployment's holds, and
   * a run that would yield it belongs on the queue where every replica can reach it.
   */
  startHere(tenantId: string, runId: string, sessionId?: string, created?: CreatedRun): boolean {
    if (!this.canStartHere()) return false;
    this.free--;
    const delivery: RunDelivery = {
      tenantId,
      runId,
      sessionId,
      created: created?.run,
      storedTools: created?.storedTools,
      deliveryCount: 1,
      ack: () => undefined,
      working: () => undefined,
      // Handing it back (this replica stops, or the database was away) puts it on the queue;
      // if that fails too, the supervisor's sweep finds the run without a live claim.
      nak: () =>
        void this.enqueuer.enqueue(tenantId, runId, 'handover', sessionId).catch((err: unknown) => {
          this.logger.warn({ err, tenantId, runId }, 'could not put the run back on the queue; the sweep will');
        }),
    };
    this.outsideCaller(() => this.begin(delivery));
    return true;
  }

  /** Stops this worker's execution of the run, if it has it. */
  abort(runId: string, kind: 'cancel' | 'shutdown' | 'lease_lost'): boolean {
    const controller = this.active.get(runId);
    controller?.abort(new RunAbort(kind));
    return controller !== undefined;
  }

  /**
   * Hands every run this replica executes back to the queue so another replica (or this one
   * after its restart) resumes it at once, instead of waiting for the lease to lapse.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.cancelSubscription?.unsubscribe();
    await this.messages?.close().catch(() => undefined);
    for (const parked of this.parked.splice(0)) {
      clearTimeout(parked.timer);
      parked.msg.nak();
    }
    for (const runId of this.active.keys()) this.abort(runId, 'shutdown');
    await Promise.allSettled([...this.handlers]);
  }

  private async pull(messages: ConsumerMessages): Promise<void> {
    for await (const msg of messages) {
      await this.takeSlot();
      if (this.stopping) {
        msg.nak();
        this.giveBackSlot();
        continue;
      }
      const parsed = this.nats.parseEvent(runQueuedContract, msg.data);
      if (!parsed) {
        this.logger.warn('dropped an invalid run-queue message');
        msg.term();
        this.giveBackSlot();
        continue;
      }
      if (await this.yieldsToOtherTenants(parsed.tenant_id)) {
        const waitMs = Math.min(YIELD_RETRY_MAX_MS, YIELD_RETRY_STEP_MS * msg.info.deliveryCount);
        this.giveBackSlot();
        if (!this.park(msg, parsed, waitMs)) msg.nak(waitMs);
        continue;
      }
      this.beginMessage(msg, parsed);
    }
  }

  /** Executes the run of a queue message in the worker slot already taken for it. */
  private beginMessage(msg: JsMsg, queued: RunQueued): void {
    this.begin({
      tenantId: queued.tenant_id,
      runId: queued.run_id,
      sessionId: queued.session_id,
      deliveryCount: msg.info.deliveryCount,
      ack: () => msg.ack(),
      nak: (delayMs) => msg.nak(delayMs),
      working: () => msg.working(),
    });
  }

  /** Executes a delivered run in the worker slot already taken for it. */
  private begin(delivery: RunDelivery): void {
    const { tenantId } = delivery;
    this.countHeld(tenantId, +1);
    const handler = this.handle(delivery).finally(() => {
      this.handlers.delete(handler);
      this.countHeld(tenantId, -1);
      this.releaseSlot();
    });
    this.handlers.add(handler);
  }

  /**
   * Keeps a run that yielded a reserved worker here for the time it would otherwise spend
   * back on the queue, and starts it the moment a worker outside the reserve frees up (or
   * its tenant falls below its share). Back on the queue, a yielded run could only come back
   * after its delay, so a tenant alone with a burst one run larger than the workers outside
   * the reserve waited up to seconds after a worker was free. The wait is no longer than
   * the queue's delay would have been, so another replica with free workers still gets the
   * run as soon as it would have; and no more runs are parked than workers are reserved,
   * so a backlog stays on the queue, where every replica can reach it.
   */
  private park(msg: JsMsg, queued: RunQueued, waitMs: number): boolean {
    if (this.parked.length >= reservedWorkers(this.config.RUNBOX_RUN_WORKERS)) return false;
    // The message is not acknowledged while it waits: its ack wait (the lease) starts again,
    // and the wait stays within it.
    msg.working();
    const parked: ParkedRun = {
      msg,
      queued,
      timer: setTimeout(() => {
        if (this.unpark(parked)) msg.nak();
      }, Math.min(waitMs, this.leaseMs / 2)),
    };
    this.parked.push(parked);
    return true;
  }

  /** Takes a run off the parked list; false if it was no longer there. */
  private unpark(parked: ParkedRun): boolean {
    const index = this.parked.indexOf(parked);
    if (index < 0) return false;
    this.parked.splice(index, 1);
    clearTimeout(parked.timer);
    return true;
  }

  /**
   * Offers free workers to the parked runs, oldest first, each under the same reserve rule
   * as a pulled run. A worker freed while an offer is under way is offered in another pass.
   */
  private async offerParked(): Promise<void> {
    if (this.offeringParked) {
      this.offerAgain = true;
      return;
    }
    this.offeringParked = true;
    try {
      do {
        this.offerAgain = false;
        for (const parked of [...this.parked]) {
          if (this.free === 0 || this.stopping) return;
          this.free--;
          const yields = await this.yieldsToOtherTenants(parked.queued.tenant_id);
          // Its wait may have ended meanwhile (the message is back on the queue).
          if (yields || !this.unpark(parked)) {
            this.giveBackSlot();
            continue;
          }
          this.beginMessage(parked.msg, parked.queued);
        }
      } while (this.offerAgain);
    } finally {
      this.offeringParked = false;
    }
  }

  private async handle(delivery: RunDelivery): Promise<void> {
    const { tenantId, runId, sessionId } = delivery;
    const log = this.logger.child({ tenantId, runId });
    // One claim per message, not per process: a second message for a run this replica is
    // already executing must find it held, like any other replica would.
    const owner = `${this.workerId}/${randomBytes(4).toString('hex')}`;
    let claimed = false;
    const controller = new AbortController();
    // Every concurrent tool call of a turn listens on the run's signal.
    setMaxListeners(0, controller.signal);
    let heartbeat: NodeJS.Timeout | undefined;
    // The session's tenant tools are listed while the run is claimed: the listing does not
    // depend on the run's options, and the run's start needs it.
    const tenantTools = sessionId ? { sessionId, listing: this.toolSelection.listTenantTools(tenantId, sessionId, controller.signal, delivery.storedTools) } : undefined;
    try {
      const claim: ClaimOutcome = delivery.created
        ? { kind: 'claimed', run: delivery.created, recovered: false, recoveries: 0 }
        : await this.runs.claim(tenantId, runId, owner, this.leaseMs);
      if (claim.kind === 'finished') return delivery.ack();
      if (claim.kind === 'held') return delivery.nak(claim.retryInMs);
      claimed = true;
      this.active.set(runId, controller);
      heartbeat = setInterval(() => void this.beat(delivery, tenantId, runId, owner, controller), Math.max(500, Math.floor(this.leaseMs / 3)));
      const outcome = await this.executeThroughOutages(claim, { tenantId, runId, owner, controller, log, tenantTools });
      // Every way a run ends (its completion, failure or cancel) clears the lease in the
      // same statement, so there is nothing left to let go: one transaction less per run.
      if (outcome === 'finished') claimed = false;
      if (outcome === 'aborted' && this.stopping) {
        await this.runs.releaseLease(tenantId, runId, owner);
        claimed = false;
        delivery.nak(); // straight back to the queue for another replica
      } else {
        delivery.ack();
      }
    } catch (err) {
      // Only infrastructure trouble gets here (the loop turns a run's own failures into a
      // failed run): try again later, backing off while it lasts.
      const deliveries = delivery.deliveryCount;
      log.error({ err, deliveries }, 'run worker failed; the run will be retried');
      // Postgres or NATS away: soon again, so the run goes on within seconds of their return.
      delivery.nak(Math.min(isTransientInfrastructureError(err) ? 5_000 : 30_000, 1_000 * deliveries));
    } finally {
      clearInterval(heartbeat);
      if (this.active.get(runId) === controller) this.active.delete(runId);
      if (claimed) await this.runs.releaseLease(tenantId, runId, owner).catch(() => undefined);
    }
  }

  /**
   * Executes a claimed run. When Postgres or NATS goes away mid-run, the worker keeps the
   * run (the queue message alive, the claim renewed by the heartbeat once the database
   * answers) and, as soon as the database answers again, takes its claim up again and goes
   * on from the stored state, rather than handing the run back to wait out the lease. If
   * another worker took the run over meanwhile, this one lets go.
   */
  private async executeThroughOutages(first: Extract<ClaimOutcome, { kind: 'claimed' }>, work: ClaimedWork): Promise<RunOutcome> {
    const { tenantId, runId, owner, controller, log } = work;
    let tenantTools = work.tenantTools;
    const holdClaim = async (): Promise<boolean> => {
      const status = await this.runs.renewLease(tenantId, runId, owner, this.leaseMs);
      if (status === null) controller.abort(new RunAbort('lease_lost'));
      return status !== null;
    };
    let claim = first;
    for (let outages = 0; ; outages++) {
      try {
        const listed = tenantTools;
        // After an outage the run is taken up again from the start: its tools are listed anew.
        tenantTools = undefined;
        return await this.loop.execute(claim.run, controller.signal, {
          recovered: claim.recovered,
          recoveries: claim.recoveries,
          afterOutage: outages > 0,
          holdClaim,
          tenantTools: listed,
          lease: { owner, ms: this.leaseMs },
        });
      } catch (err) {
        if (controller.signal.aborted) return 'aborted';
        if (!isTransientInfrastructureError(err) || outages >= MAX_OUTAGES_PER_CLAIM) throw err;
        log.warn({ err }, 'Postgres or NATS went away during the run; continuing once it is back');
        const again = await this.reclaimWhenReachable(tenantId, runId, owner, controller.signal).catch((e: unknown) => {
          if (controller.signal.aborted) return undefined;
          throw e;
        });
        if (again?.kind !== 'claimed') return again?.kind === 'finished' ? 'finished' : 'aborted';
        claim = again;
      }
    }
  }

  /** Claims the run again with the same owner as soon as the database answers (another worker's live claim wins). */
  private async reclaimWhenReachable(tenantId: string, runId: string, owner: string, signal: AbortSignal): Promise<ClaimOutcome> {
    for (let attempt = 0; ; attempt++) {
      await abortableDelay(Math.min(RECLAIM_RETRY_MAX_MS, 100 * 2 ** attempt), signal);
      try {
        return await this.runs.claim(tenantId, runId, owner, this.leaseMs);
      } catch (err) {
        if (!isTransientInfrastructureError(err)) throw err;
      }
    }
  }

  /**
   * Executes a sub-run here, inside the worker (and the worker slot) of the run that
   * delegated to it, instead of through the queue: the parent waits for its answer anyway,
   * and a sub-run never waits for a free worker its parent holds. It is claimed and
   * heartbeated like any run, so a crash hands it to the supervisor and to the resumed
   * parent alike, and a cancel of it reaches it here. The parent's stop stops it too.
   */
  async executeInline(tenantId: string, runId: string, parentSignal: AbortSignal): Promise<InlineOutcome> {
    if (this.stopping || parentSignal.aborted) return 'aborted';
    const owner = `${this.workerId}/${randomBytes(4).toString('hex')}`;
    const claim = await this.runs.claim(tenantId, runId, owner, this.leaseMs);
    if (claim.kind === 'finished') return 'finished';
    if (claim.kind === 'held') return 'held';
    const controller = new AbortController();
    setMaxListeners(0, controller.signal);
    const onParentAbort = () => controller.abort(parentSignal.reason);
    parentSignal.addEventListener('abort', onParentAbort, { once: true });
    this.active.set(runId, controller);
    const heartbeat = setInterval(() => void this.beat(undefined, tenantId, runId, owner, controller), Math.max(500, Math.floor(this.leaseMs / 3)));
    const work = (async () => {
      try {
        return await this.loop.execute(claim.run, controller.signal, { recovered: claim.recovered, recoveries: claim.recoveries, lease: { owner, ms: this.leaseMs } });
      } finally {
        clearInterval(heartbeat);
        parentSignal.removeEventListener('abort', onParentAbort);
        if (this.active.get(runId) === controller) this.active.delete(runId);
        await this.runs.releaseLease(tenantId, runId, owner).catch(() => undefined);
      }
    })();
    // A stopping gateway waits for this too, so the sub-run's claim is let go before it
    // exits and the replica resuming the parent can take the sub-run over at once.
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.handlers.add(settled);
    void settled.finally(() => this.handlers.delete(settled));
    return work;
  }

  /** Keeps the message (if any) and the claim alive; stops the run if the claim was lost or the run cancelled. */
  private async beat(delivery: RunDelivery | undefined, tenantId: string, runId: string, owner: string, controller: AbortController): Promise<void> {
    delivery?.working();
    try {
      const status = await this.runs.renewLease(tenantId, runId, owner, this.leaseMs);
      if (status === null) controller.abort(new RunAbort('lease_lost'));
      else if (status === 'cancelled') controller.abort(new RunAbort('cancel'));
    } catch (err) {
      this.logger.warn({ err, runId }, 'could not renew the run lease');
    }
  }

  /**
   * Whether a run of the tenant should leave the worker it was about to take to other
   * tenants: the worker is one of the reserved few, and its tenant already holds its fair
   * share. The slot is taken already, so `free` counts what would be left.
   */
  private async yieldsToOtherTenants(tenantId: string): Promise<boolean> {
    const workers = this.config.RUNBOX_RUN_WORKERS;
    if (!takesFromReserve(this.free, workers)) return false;
    try {
      return !belowFairShare(tenantId, await this.currentHolds(), workers);
    } catch (err) {
      // Fairness is an optimisation over the queue's order: without a count, run the work.
      this.logger.warn({ err }, 'could not read the worker holds; taking the run');
      return false;
    }
  }

  /** Who holds workers now: this replica's own count, and a recent read of the others from Postgres. */
  private async currentHolds(): Promise<WorkerHolds> {
    if (!this.elsewhere || Date.now() - this.elsewhere.readAt > HOLDS_TTL_MS) {
      this.elsewhere = { readAt: Date.now(), holds: await this.runs.workerHoldsElsewhere(this.workerId) };
    }
    const byTenant = new Map(this.elsewhere.holds.byTenant);
    for (const [tenantId, held] of this.heldHere) byTenant.set(tenantId, (byTenant.get(tenantId) ?? 0) + held);
    return { byTenant, replicas: this.elsewhere.holds.replicas + 1 };
  }

  private countHeld(tenantId: string | undefined, delta: number): void {
    if (tenantId === undefined) return;
    const held = (this.heldHere.get(tenantId) ?? 0) + delta;
    if (held > 0) this.heldHere.set(tenantId, held);
    else this.heldHere.delete(tenantId);
  }

  private takeSlot(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  /** A run ended: its slot goes to a message waiting for one, else to a parked run. */
  private releaseSlot(): void {
    this.giveBackSlot();
    if (this.free > 0 && this.parked.length > 0) void this.offerParked();
  }

  private giveBackSlot(): void {
    const next = this.slotWaiters.shift();
    if (next) next();
    else this.free++;
  }
}
