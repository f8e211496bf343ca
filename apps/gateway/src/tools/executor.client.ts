import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import {
  executorPingContract,
  pinnedSessionReleaseSubject,
  pinnedToolCallSubject,
  sessionReleaseContract,
  ToolCallReply,
  toolCallContract,
  ToolCallRequest,
  toolCancelContract,
} from '@app/contracts';
import { NATS_CLIENT, NatsClient, NatsTimeoutError } from '@app/messaging';

/**
 * Raised when no executor answered. With `outcomeUnknown`, one took the call but its reply
 * never came: the call may or may not have run.
 */
export class ExecutorUnavailableError extends Error {
  constructor(
    message: string,
    readonly outcomeUnknown = false,
  ) {
    super(message);
  }
}

/** The gateway's side of the executor contracts. */
@Injectable()
export class ExecutorClient {
  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
  ) {}

  async callTool(request: ToolCallRequest, executorId: string | null): Promise<ToolCallReply> {
    try {
      return await this.nats.request(
        toolCallContract,
        // The deployment, never the tenant, decides where sandbox tools run.
        { ...request, backend: this.config.RUNBOX_SANDBOX_BACKEND },
        { timeoutMs: request.timeout_ms + this.config.RUNBOX_EXECUTOR_GRACE_MS, subject: executorId ? pinnedToolCallSubject(executorId) : undefined },
      );
    } catch (err) {
      if (err instanceof NatsTimeoutError) {
        throw new ExecutorUnavailableError(
          err.noResponders
            ? `no executor is serving ${executorId ? `executor ${executorId}` : 'sandboxes'}`
            : 'the executor did not answer in time; the tool call may or may not have run',
          !err.noResponders,
        );
      }
      throw err;
    }
  }

  cancelTool(tenantId: string, sessionId: string, callId: string): void {
    this.nats.publish(toolCancelContract, { tenant_id: tenantId, session_id: sessionId, call_id: callId });
  }

  /** Asks the session's executor to remove its sandbox. False when no executor answered, or the one that did could not. */
  async releaseSession(tenantId: string, sessionId: string, executorId: string | null): Promise<boolean> {
    const subject = executorId ? pinnedSessionReleaseSubject(executorId) : undefined;
    try {
      const reply = await this.nats.request(sessionReleaseContract, { tenant_id: tenantId, session_id: sessionId }, { timeoutMs: 30_000, subject });
      return !('ok' in reply);
    } catch (err) {
      if (err instanceof NatsTimeoutError) return false;
      throw err;
    }
  }

  async ping(timeoutMs = 2_000): Promise<{ executor_id: string; docker: boolean } | null> {
    try {
      const reply = await this.nats.request(executorPingContract, {}, { timeoutMs });
      return 'ok' in reply ? null : reply;
    } catch {
      return null;
    }
  }
}
