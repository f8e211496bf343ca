import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import {
  EXECUTOR_PING_SUBJECT,
  executorPingReplySchema,
  executorPingSchema,
  pinnedSessionReleaseSubject,
  pinnedToolCallSubject,
  SESSION_RELEASE_SUBJECT,
  sessionReleaseReplySchema,
  sessionReleaseSchema,
  TOOL_CALL_SUBJECT,
  TOOL_CANCEL_SUBJECT,
  ToolCallReply,
  toolCallReplySchema,
  ToolCallRequest,
  toolCallRequestSchema,
  toolCancelSchema,
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
    const subject = executorId ? pinnedToolCallSubject(executorId) : TOOL_CALL_SUBJECT;
    try {
      return await this.nats.request(
        subject,
        toolCallRequestSchema,
        // The deployment, never the tenant, decides where sandbox tools run.
        { ...request, backend: this.config.RUNBOX_SANDBOX_BACKEND },
        toolCallReplySchema,
        request.timeout_ms + this.config.RUNBOX_EXECUTOR_GRACE_MS,
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
    this.nats.publish(TOOL_CANCEL_SUBJECT, toolCancelSchema, { tenant_id: tenantId, session_id: sessionId, call_id: callId });
  }

  /** Asks the session's executor to remove its sandbox. False when no executor answered. */
  async releaseSession(tenantId: string, sessionId: string, executorId: string | null): Promise<boolean> {
    const subject = executorId ? pinnedSessionReleaseSubject(executorId) : SESSION_RELEASE_SUBJECT;
    try {
      await this.nats.request(subject, sessionReleaseSchema, { tenant_id: tenantId, session_id: sessionId }, sessionReleaseReplySchema, 30_000);
      return true;
    } catch (err) {
      if (err instanceof NatsTimeoutError) return false;
      throw err;
    }
  }

  async ping(timeoutMs = 2_000): Promise<{ executor_id: string; docker: boolean } | null> {
    try {
      return await this.nats.request(EXECUTOR_PING_SUBJECT, executorPingSchema, {}, executorPingReplySchema, timeoutMs);
    } catch {
      return null;
    }
  }
}
