import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import {
  mcpStdioReadContract,
  McpStdioReadReply,
  mcpStdioStartContract,
  McpStdioStartReply,
  mcpStdioStopContract,
  McpStdioStopReply,
  mcpStdioWriteContract,
  McpStdioWriteReply,
  pinnedMcpStdioSubject,
  RequestContract,
  StdioCommand,
} from '@app/contracts';
import { NATS_CLIENT, NatsClient, NatsContractClient, NatsTimeoutError } from '@app/messaging';
import { SessionsRepository } from '../sessions/sessions.repository';

/** Which sandbox a process lives in. */
export interface StdioTarget {
  tenantId: string;
  sessionId: string;
}

/**
 * What SandboxStdioTransport needs from the rest of Runbox: where the session's sandbox is,
 * and the four operations on a process in it. SandboxStdioClient is the real one (NATS to
 * the executor); a unit test may give a fake.
 */
export interface SandboxStdioPort {
  /** The executor holding the session's sandbox (null: none yet); SessionUnavailableError if the session is not live. */
  executorOf(target: StdioTarget): Promise<string | null>;
  start(target: StdioTarget, executorId: string | null, command: StdioCommand): Promise<McpStdioStartReply>;
  write(target: StdioTarget, executorId: string, handle: string, data: string): Promise<McpStdioWriteReply>;
  read(target: StdioTarget, executorId: string, handle: string, after: number, waitMs: number): Promise<McpStdioReadReply>;
  stop(target: StdioTarget, executorId: string, handle: string): Promise<McpStdioStopReply>;
}

export class SessionUnavailableError extends Error {}

/** Starting may make the session's sandbox first (a container and its workspace disk). */
const START_TIMEOUT_MS = 90_000;
const OP_TIMEOUT_MS = 15_000;

/** The gateway's side of the mcp-stdio contracts (libs/contracts/src/mcp-stdio). */
@Injectable()
export class SandboxStdioClient extends NatsContractClient implements SandboxStdioPort {
  constructor(
    @Inject(NATS_CLIENT) nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly sessions: SessionsRepository,
  ) {
    super(nats);
  }

  async executorOf(target: StdioTarget): Promise<string | null> {
    const route = await this.sessions.toolRoute(target.tenantId, target.sessionId);
    if (!route) throw new SessionUnavailableError(`session ${target.sessionId} not found`);
    return route.executorId;
  }

  start(target: StdioTarget, executorId: string | null, command: StdioCommand): Promise<McpStdioStartReply> {
    return this.call(mcpStdioStartContract, START_TIMEOUT_MS, executorId, { ...this.base(target), ...command });
  }

  write(target: StdioTarget, executorId: string, handle: string, data: string): Promise<McpStdioWriteReply> {
    return this.call(mcpStdioWriteContract, OP_TIMEOUT_MS, executorId, { ...this.base(target), handle, data });
  }

  read(target: StdioTarget, executorId: string, handle: string, after: number, waitMs: number): Promise<McpStdioReadReply> {
    return this.call(mcpStdioReadContract, waitMs + this.config.RUNBOX_EXECUTOR_GRACE_MS, executorId, {
      ...this.base(target),
      handle,
      after,
      wait_ms: waitMs,
    });
  }

  stop(target: StdioTarget, executorId: string, handle: string): Promise<McpStdioStopReply> {
    return this.call(mcpStdioStopContract, OP_TIMEOUT_MS, executorId, { ...this.base(target), handle });
  }

  private base(target: StdioTarget) {
    // The deployment, never the tenant, decides where sandbox processes run.
    return { tenant_id: target.tenantId, session_id: target.sessionId, backend: this.config.RUNBOX_SANDBOX_BACKEND };
  }

  private async call<Req, Rep, ReqInput>(contract: RequestContract<Req, Rep, ReqInput>, timeoutMs: number, executorId: string | null, payload: ReqInput): Promise<Rep> {
    const subject = executorId ? pinnedMcpStdioSubject(contract.subject, executorId) : undefined;
    try {
      return await this.request({ contract, timeoutMs, subject }, payload);
    } catch (err) {
      if (err instanceof NatsTimeoutError) {
        throw new Error(err.noResponders ? `no executor is serving ${executorId ? `executor ${executorId}` : 'sandboxes'}` : 'the executor did not answer in time');
      }
      throw err;
    }
  }
}
