import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { isTransientInfrastructureError } from './run-context';
import { RunControlService } from './run-control.service';
import { RunEnqueuer } from './run-enqueuer';
import { RunSweepsRepository } from './run-sweeps.repository';

/**
 * Each gateway replica sweeps every few seconds for work nobody else will notice:
 * approvals past their deadline (denied, and their runs resumed) and runs that lost their
 * queue message or their worker (put back on the queue). Postgres is the source of truth,
 * so this also repairs a NATS that lost its stream. Replicas may sweep at the same time:
 * every step is a conditional write, so only one of them acts on each row.
 */
@Injectable()
export class RunSupervisor implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;
  /** When a sweep last failed because Postgres or NATS was away. */
  private outageSeenAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly sweeps: RunSweepsRepository,
    private readonly control: RunControlService,
    private readonly enqueuer: RunEnqueuer,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweep()
        .catch((err: unknown) => {
          if (isTransientInfrastructureError(err)) this.outageSeenAt = Date.now();
          this.logger.warn({ err }, 'run sweep failed');
        })
        .finally(() => (this.sweeping = undefined));
    }, this.config.RUNBOX_RUN_SWEEP_SECONDS * 1000);
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  async sweep(): Promise<void> {
    for (const approval of await this.sweeps.expiredApprovals()) {
      await this.control.expireApproval(approval.tenantId, approval.runId, approval.callId);
    }
    // A run is stranded when no worker claims it and it was last queued two leases ago.
    const leaseMs = this.config.RUNBOX_RUN_LEASE_SECONDS * 1000;
    // Right after an outage every claim may have lapsed while its worker, alive, could not
    // renew it: give the workers a lease to renew before their runs count as stranded, or a
    // run would be taken from a worker that is about to store its tool result.
    if (Date.now() - this.outageSeenAt < leaseMs) return;
    for (const run of await this.sweeps.stranded(2 * leaseMs)) {
      if (await this.enqueuer.requeue(run.tenantId, run.id, run.dispatchedAt)) {
        this.logger.info({ tenantId: run.tenantId, runId: run.id }, 'put a stranded run back on the queue');
      }
    }
  }
}
