import { EXECUTOR_QUEUE_GROUP, executorPingContract, ExecutorReady } from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { DockerSandboxDriver } from '../sandbox/docker-sandbox.driver';
import { SandboxService } from '../sandbox/sandbox.service';

/** Answers the gateway's readiness pings: this executor is up, and whether its Docker engine is. */
export class ExecutorPingHandler {
  constructor(
    private readonly nats: NatsClient,
    private readonly sandboxes: SandboxService,
    private readonly driver: DockerSandboxDriver,
  ) {}

  listen(): void {
    this.nats.serve(executorPingContract, () => this.ping(), { queue: EXECUTOR_QUEUE_GROUP, responderId: this.sandboxes.executorId });
  }

  async ping(): Promise<ExecutorReady> {
    return { executor_id: this.sandboxes.executorId, docker: await this.driver.ping(), sandboxes: this.sandboxes.size };
  }
}
