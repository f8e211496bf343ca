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
import { NATS_CLIENT, NatsClient, NatsContractClient, NatsTimeoutError } from '@app/messaging';

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

/** How long a tool call is sent again while no executor listens on its subject (see whileNobodyListens). */
const NO_RESPONDERS_PATIENCE_MS = 2_000;

/** The gateway's side of the executor contracts: a Nest client over the NATS adapter. */
@Injectable()
export class ExecutorClient extends NatsContractClient {
  constructor(
    @Inject(NATS_CLIENT) nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
  ) {
    super(nats);
  }

  async callTool(request: ToolCallRequest, executorId: string | null): Promise<ToolCallReply> {
    try {
      return await this.whileNobodyListens(() =>
        this.request(
          { contract: toolCallContract, timeoutMs: request.timeout_ms + this.config.RUNBOX_EXECUTOR_GRACE_MS, subject: executorId ? pinnedToolCallSubject(executorId) : undefined },
          // The deployment, never the tenant, decides where sandbox tools run.
          { ...request, backend: this.config.RUNBOX_SANDBOX_BACKEND },
        ),
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

  /**
   * Sends again, for a short while, a request nobody was listening for. No responders means
   * no executor received it, so nothing ran and sending again is safe; and an executor whose
   * NATS server just went away is without its subscriptions for the moment it takes to
   * reconnect to another server of the cluster. An executor that is really gone is still
   * reported within NO_RESPONDERS_PATIENCE_MS.
   */
  private async whileNobodyListens<T>(send: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + NO_RESPONDERS_PATIENCE_MS;
    for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
      try {
        return await send();
      } catch (err) {
        if (!(err instanceof NatsTimeoutError && err.noResponders) || Date.now() + pause > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  cancelTool(tenantId: string, sessionId: string, callId: string): void {
    this.notify(toolCancelContract, { tenant_id: tenantId, session_id: sessionId, call_id: callId });
  }

  /** Asks the session's executor to remove its sandbox. False when no executor answered, or the one that did could not. */
  async releaseSession(tenantId: string, sessionId: string, executorId: string | null): Promise<boolean> {
    const subject = executorId ? pinnedSessionReleaseSubject(executorId) : undefined;
    try {
      const reply = await this.request({ contract: sessionReleaseContract, timeoutMs: 30_000, subject }, { tenant_id: tenantId, session_id: sessionId });
      return !('ok' in reply);
    } catch (err) {
      if (err instanceof NatsTimeoutError) return false;
      throw err;
    }
  }

  async ping(timeoutMs = 2_000): Promise<{ executor_id: string; docker: boolean } | null> {
    try {
      const reply = await this.request({ contract: executorPingContract, timeoutMs }, {});
      return 'ok' in reply ? null : reply;
    } catch {
      return null;
    }
  }
}
