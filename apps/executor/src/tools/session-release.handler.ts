import {
  EXECUTOR_PING_SUBJECT,
  EXECUTOR_QUEUE_GROUP,
  executorPingSchema,
  pinnedSessionReleaseSubject,
  SESSION_RELEASE_SUBJECT,
  SessionRelease,
  SessionReleaseReply,
  sessionReleaseSchema,
} from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { DockerSandboxDriver } from '../sandbox/docker-sandbox.driver';
import { SandboxService } from '../sandbox/sandbox.service';

/** Session deletion and readiness pings. */
export class SessionReleaseHandler {
  constructor(
    private readonly nats: NatsClient,
    private readonly sandboxes: SandboxService,
    private readonly driver: DockerSandboxDriver,
  ) {}

  listen(): void {
    const release = (msg: SessionRelease) => this.release(msg);
    this.nats.serve(SESSION_RELEASE_SUBJECT, sessionReleaseSchema, release, { queue: EXECUTOR_QUEUE_GROUP });
    this.nats.serve(pinnedSessionReleaseSubject(this.sandboxes.executorId), sessionReleaseSchema, release);
    this.nats.serve(
      EXECUTOR_PING_SUBJECT,
      executorPingSchema,
      async () => ({ executor_id: this.sandboxes.executorId, docker: await this.driver.ping(), sandboxes: this.sandboxes.size }),
      { queue: EXECUTOR_QUEUE_GROUP },
    );
  }

  async release(msg: SessionRelease): Promise<SessionReleaseReply> {
    const removed = await this.sandboxes.release(msg.tenant_id, msg.session_id);
    return { removed, executor_id: this.sandboxes.executorId };
  }
}
