import {
  MCP_STDIO_LIMITS,
  mcpStdioEndSchema,
  McpStdioReadReply,
  McpStdioReadRequest,
  McpStdioStartReply,
  McpStdioStartRequest,
  McpStdioStopReply,
  McpStdioStopRequest,
  McpStdioWriteReply,
  McpStdioWriteRequest,
  RpcFailure,
  ToolResult,
} from '@app/contracts';
import type { Logger } from 'pino';
import { z } from 'zod';
import { sandboxFailure } from '../sandbox/sandbox-failure';
import { CallTarget, SandboxService } from '../sandbox/sandbox.service';

/** What the deployment allows each session's stdio servers (RUNBOX_MCP_STDIO_*). */
export interface McpStdioPolicy {
  maxProcesses: number;
  idleSeconds: number;
}

/** Starting may first make the session's sandbox (a new container, its workspace disk). */
const START_TIMEOUT_MS = 60_000;
const OP_TIMEOUT_MS = 10_000;
/** The agent answers a read when its wait is over; this is the margin for the way back. */
const READ_MARGIN_MS = 10_000;

const startedSchema = z.object({ handle: z.string(), pid: z.number().int() });
const writtenSchema = z.object({ accepted_bytes: z.number().int() });
const readSchema = z.object({ lines: z.array(z.string()), last_seq: z.number().int().min(0), exited: mcpStdioEndSchema.nullable() });
const stoppedSchema = z.object({ stderr: z.string() });

/**
 * The executor's half of the mcp-stdio contracts: each request becomes one op of the
 * sandbox agent (deploy/sandbox/agent/runbox_tools/mcp_stdio.py), which owns the process.
 * Only start may make the session's sandbox; write, read and stop go to the sandbox this
 * executor holds, since a new one would not have the process.
 */
export class McpStdioHandler {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly policy: McpStdioPolicy,
    private readonly logger: Logger,
  ) {}

  start(req: McpStdioStartRequest): Promise<McpStdioStartReply> {
    const args = {
      command: req.command,
      args: req.args,
      env: req.env,
      ...(req.cwd !== undefined ? { cwd: req.cwd } : {}),
      limits: { max_processes: this.policy.maxProcesses, idle_seconds: this.policy.idleSeconds, max_line_bytes: MCP_STDIO_LIMITS.maxLineBytes },
    };
    return this.run(req, startedSchema, () => this.sandboxes.call(targetOf(req), 'mcp_start', args, START_TIMEOUT_MS));
  }

  write(req: McpStdioWriteRequest): Promise<McpStdioWriteReply> {
    return this.run(req, writtenSchema, () => this.sandboxes.callHeld(targetOf(req), 'mcp_write', { handle: req.handle, data: req.data }, OP_TIMEOUT_MS));
  }

  read(req: McpStdioReadRequest): Promise<McpStdioReadReply> {
    const args = { handle: req.handle, after: req.after, wait_ms: req.wait_ms };
    return this.run(req, readSchema, () => this.sandboxes.callHeld(targetOf(req), 'mcp_read', args, req.wait_ms + READ_MARGIN_MS));
  }

  stop(req: McpStdioStopRequest): Promise<McpStdioStopReply> {
    return this.run(req, stoppedSchema, () => this.sandboxes.callHeld(targetOf(req), 'mcp_stop', { handle: req.handle }, OP_TIMEOUT_MS));
  }

  /** One op: the agent's metadata on success, its error code and message on failure, every infrastructure failure as a failure reply. */
  private async run<T extends z.ZodType>(
    req: { tenant_id: string; session_id: string; backend: CallTarget['backend'] },
    answer: T,
    op: () => Promise<ToolResult>,
  ): Promise<({ ok: true; executor_id: string } & z.output<T>) | RpcFailure> {
    const executor_id = this.sandboxes.executorId;
    const fail = (code: string, message: string): RpcFailure => ({ ok: false, executor_id, error: { code, message } });
    if (!this.sandboxes.supports(req.backend)) return fail('backend_disabled', `this executor does not run the ${req.backend} backend`);
    let result: ToolResult;
    try {
      result = await op();
    } catch (err) {
      const failure = sandboxFailure(err);
      if (!failure) throw err;
      this.logger.warn({ tenantId: req.tenant_id, sessionId: req.session_id, reason: failure.message }, 'mcp stdio op failed');
      return fail(failure.code, failure.message);
    }
    if (result.is_error) {
      const code = typeof result.metadata.error_code === 'string' ? result.metadata.error_code : 'mcp_stdio_failed';
      return fail(code, result.output);
    }
    const parsed = answer.safeParse(result.metadata);
    if (!parsed.success) return fail('sandbox_failed', 'the sandbox answered an MCP stdio op with a result of the wrong shape');
    return { ok: true, executor_id, ...(parsed.data as object) } as { ok: true; executor_id: string } & z.output<T>;
  }
}

function targetOf(req: { tenant_id: string; session_id: string; backend: CallTarget['backend'] }): CallTarget {
  return { tenantId: req.tenant_id, sessionId: req.session_id, backend: req.backend };
}
