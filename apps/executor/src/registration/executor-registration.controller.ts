import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { ExecutorDecommission, executorDecommissionContract, executorDiscoverContract } from '@app/contracts';
import { LOGGER } from '@app/logging';
import { ReceivesEvent } from '@app/messaging';
import type { Logger } from 'pino';
import { SandboxService } from '../sandbox/sandbox.service';
import { ExecutorAnnouncer } from './executor-announcer';

/** Gateways asking executors to announce themselves, and an operator's decommission. */
@Controller()
export class ExecutorRegistrationController {
  constructor(
    private readonly announcer: ExecutorAnnouncer,
    private readonly sandboxes: SandboxService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  @ReceivesEvent(executorDiscoverContract)
  discover(): void {
    this.announcer.announce();
  }

  /**
   * Decommissioned: it takes no new session from now on, and says so in every heartbeat.
   * Its sessions are the gateways' to release (RUNBOX_ON_EXECUTOR_LOSS); sandboxes moved
   * elsewhere become orphans here, which the sweep removes.
   */
  @ReceivesEvent(executorDecommissionContract)
  decommission(@Payload() message: ExecutorDecommission): void {
    if (message.executor_id !== this.sandboxes.executorId) return;
    this.sandboxes.stopAdmitting('decommissioned');
    this.logger.warn({ executorId: message.executor_id }, 'decommissioned: taking no new session');
    this.announcer.announce();
  }
}
