import { ExecutorReady } from '@app/contracts';
import { DockerSandboxDriver } from '../sandbox/docker-sandbox.driver';
import { SandboxService } from '../sandbox/sandbox.service';

/** Answers the gateway's readiness pings: this executor is up, and whether its Docker engine is. */
export class ExecutorPingHandler {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly driver: DockerSandboxDriver,
  ) {}

  async ping(): Promise<ExecutorReady> {
    return { executor_id: this.sandboxes.executorId, docker: await this.driver.ping(), sandboxes: this.sandboxes.size };
  }
}
