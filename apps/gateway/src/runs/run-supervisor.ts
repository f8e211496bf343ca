import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
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
        .catch((err: unknown) => this.logger.warn({ err }, 'run sweep failed'))
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
    const idleMs = 2 * this.config.RUNBOX_RUN_LEASE_SECONDS * 1000;
    for (const run of await this.sweeps.stranded(idleMs)) {
      if (await this.enqueuer.requeue(run.tenantId, run.id, run.dispatchedAt)) {
        this.logger.info({ tenantId: run.tenantId, runId: run.id }, 'put a stranded run back on the queue');
      }
    }
  }
}
