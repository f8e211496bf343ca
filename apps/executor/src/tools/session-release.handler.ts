import { SessionRelease, SessionReleaseReply } from '@app/contracts';
import { SandboxService } from '../sandbox/sandbox.service';

/** Removes a deleted session's sandbox, when the gateway asks any executor or this one. */
export class SessionReleaseHandler {
  constructor(
    private readonly sandboxes: SandboxService,
  ) {}

  async release(msg: SessionRelease): Promise<SessionReleaseReply> {
    const removed = await this.sandboxes.release(msg.tenant_id, msg.session_id);
    return { removed, executor_id: this.sandboxes.executorId };
  }
}
