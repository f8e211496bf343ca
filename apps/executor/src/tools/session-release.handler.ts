import { EXECUTOR_QUEUE_GROUP, pinnedSessionReleaseSubject, SessionRelease, SessionReleaseReply, sessionReleaseContract } from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { SandboxService } from '../sandbox/sandbox.service';

/** Removes a deleted session's sandbox, when the gateway asks any executor or this one. */
export class SessionReleaseHandler {
  constructor(
    private readonly nats: NatsClient,
    private readonly sandboxes: SandboxService,
  ) {}

  listen(): void {
    const release = (msg: SessionRelease) => this.release(msg);
    const responderId = this.sandboxes.executorId;
    this.nats.serve(sessionReleaseContract, release, { queue: EXECUTOR_QUEUE_GROUP, responderId });
    this.nats.serve(sessionReleaseContract, release, { subject: pinnedSessionReleaseSubject(responderId), responderId });
  }

  async release(msg: SessionRelease): Promise<SessionReleaseReply> {
    const removed = await this.sandboxes.release(msg.tenant_id, msg.session_id);
    return { removed, executor_id: this.sandboxes.executorId };
  }
}
