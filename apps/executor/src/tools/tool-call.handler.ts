import { SANDBOX_STARTING, ToolCallReply, toolCallRequestSchema, ToolCancel } from '@app/contracts';
import { NatsClient } from '@app/messaging';
import { isDatabaseUnavailable } from '@app/persistence';
import type { Logger } from 'pino';
import { z } from 'zod';
import { ChannelClosedError, ChannelTimeoutError, DuplicateRequestError, ProtocolViolationError } from '../sandbox/agent-channel';
import { SandboxQuotaError } from '../sandbox/sandbox-quota';
import { isVpsTransferTool, VpsTransferHandler } from '../ssh/vps-transfer.handler';
import { InFlightCalls } from './in-flight-calls';
import {
  BackendDisabledError,
  BackendMismatchError,
  CallCancelledError,
  NewSessionRefusedError,
  SandboxService,
  SandboxStartingError,
  SandboxUnavailableError,
  SessionNotFoundError,
} from '../sandbox/sandbox.service';

/** The tools that run inside the sandbox agent, by the agent's op name. */
export const SANDBOX_OPS = new Set(['terminal', 'read_file', 'write_file', 'edit_file', 'list_files', 'glob', 'grep', 'read_bytes', 'write_bytes']);

/** Time the sandbox gets beyond the tool's own limit to report a timeout itself. */
const CHANNEL_MARGIN_MS = 5_000;

/** Room in one message for what a reply carries besides the output (metadata, ids). */
const REPLY_ROOM_BYTES = 64 * 1024;
/** A server configured with a tiny max_payload still gets readable output (in pieces). */
const MIN_OUTPUT_BYTES = 16 * 1024;

/** A tool call as it arrives, defaults filled in (the contract's ToolCallRequest is what a caller sends). */
export type ReceivedToolCall = z.output<typeof toolCallRequestSchema>;

/** Tool calls: routes each to the session's sandbox and turns its failures into error replies. */
export class ToolCallHandler {
  constructor(
    private readonly nats: NatsClient,
    private readonly sandboxes: SandboxService,
    private readonly logger: Logger,
    private readonly transfers?: VpsTransferHandler,
    readonly inFlight = new InFlightCalls(),
  ) {}

  /** Calls in flight are tracked, so a draining executor lets them finish before it exits. */
  handle(req: ReceivedToolCall): Promise<ToolCallReply> {
    return this.inFlight.track(() => this.logged(req));
  }

  /**
   * One line per call, whatever its outcome: with the caller's correlation id (the logger
   * adds it), it ties the gateway's request to what this executor did for it.
   */
  private async logged(req: ReceivedToolCall): Promise<ToolCallReply> {
    const started = Date.now();
    const log = { tenantId: req.tenant_id, sessionId: req.session_id, callId: req.call_id, tool: req.tool, backend: req.backend };
    try {
      const reply = await this.run(req, log);
      const outcome = !reply.ok ? reply.error.code : reply.result.is_error ? 'tool_error' : 'ok';
      this.logger.info({ ...log, outcome, ms: Date.now() - started }, 'tool call');
      return reply;
    } catch (err) {
      this.logger.info({ ...log, outcome: 'internal_error', ms: Date.now() - started }, 'tool call');
      throw err;
    }
  }

  private async run(req: ReceivedToolCall, log: Record<string, string>): Promise<ToolCallReply> {
    const executor_id = this.sandboxes.executorId;
    const fail = (code: string, message: string): ToolCallReply => ({ ok: false, executor_id, error: { code, message } });
    const transfer = isVpsTransferTool(req.tool) && this.transfers;
    if (!SANDBOX_OPS.has(req.tool) && !transfer) return fail('unknown_tool', `${req.tool} is not a sandbox tool`);
    if (!this.sandboxes.supports(req.backend)) return fail('backend_disabled', refusal(req.backend));
    try {
      const args = { ...req.arguments, max_output_chars: req.max_output_chars, ...this.byteBudget(req) };
      const target = { tenantId: req.tenant_id, sessionId: req.session_id, backend: req.backend };
      const result = transfer
        ? await transfer.handle(target, req.tool as Parameters<VpsTransferHandler['handle']>[1], args, req.timeout_ms, req.start_timeout_ms)
        : await this.sandboxes.call(target, req.tool, args, req.timeout_ms + CHANNEL_MARGIN_MS, { callId: req.call_id, startWithinMs: req.start_timeout_ms });
      return { ok: true, executor_id, result };
    } catch (err) {
      if (err instanceof SessionNotFoundError) return fail('not_found', err.message);
      if (err instanceof NewSessionRefusedError) return fail(err.reason, err.message);
      if (err instanceof SandboxQuotaError) return fail('quota_exceeded', err.message);
      if (err instanceof BackendDisabledError) return fail('backend_disabled', refusal(req.backend));
      if (err instanceof BackendMismatchError) return fail('backend_mismatch', err.message);
      if (err instanceof SandboxUnavailableError) return fail('sandbox_failed', err.message);
      if (err instanceof SandboxStartingError) return fail(SANDBOX_STARTING, err.message);
      if (err instanceof DuplicateRequestError) return fail('duplicate_call', err.message);
      if (err instanceof CallCancelledError) {
        return { ok: true, executor_id, result: { output: err.message, metadata: { cancelled: true }, is_error: true } };
      }
      if (err instanceof ProtocolViolationError) {
        this.logger.warn({ ...log, violation: err.violation }, 'sandbox broke the channel protocol');
        return fail('sandbox_failed', `${err.message}; it was stopped, and the next call starts a new one with the same workspace`);
      }
      if (err instanceof ChannelClosedError || err instanceof ChannelTimeoutError) {
        const health = await this.sandboxes.diagnose(req.tenant_id, req.session_id);
        this.logger.warn({ ...log, health, reason: err.message }, 'sandbox channel failed');
        return fail(
          'sandbox_failed',
          health === 'dead'
            ? `the sandbox ${req.backend === 'local' ? 'agent' : 'container'} died during the call (out of memory, or killed); the next call starts a new one with the same workspace`
            : `the sandbox did not finish the call: ${err.message}`,
        );
      }
      // Raised before the call reached its sandbox (finding or recording it), so nothing ran.
      if (isDatabaseUnavailable(err)) return fail('unavailable', 'the executor cannot reach the database right now (a restart?); nothing ran; try again shortly');
      throw err;
    }
  }

  /**
   * The bytes the sandbox may put in a result's output before it spills the output to a
   * workspace file: what fits in one NATS message with room for the rest of the reply.
   * read_bytes, and calls whose caller reads the output itself, are exempt: they need
   * every byte, and a reply over the limit travels in pieces.
   */
  private byteBudget(req: ReceivedToolCall): { max_output_bytes?: number } {
    if (req.tool === 'read_bytes' || req.whole_output) return {};
    return { max_output_bytes: Math.max(this.nats.messageLimitBytes - REPLY_ROOM_BYTES, MIN_OUTPUT_BYTES) };
  }

  /**
   * Sent to every executor: the one holding the session's channel stops the call, and
   * each one remembers the cancel in case the call reaches it later.
   */
  async cancel(msg: ToolCancel): Promise<void> {
    try {
      await this.sandboxes.cancel(msg.tenant_id, msg.session_id, msg.call_id);
    } catch (err) {
      this.logger.warn({ tenantId: msg.tenant_id, sessionId: msg.session_id, callId: msg.call_id, err }, 'cancelling a call failed');
    }
  }
}

function refusal(backend: string): string {
  return backend === 'local'
    ? 'the local backend runs commands on the executor host without any isolation; this executor refuses it unless its operator sets RUNBOX_UNSAFE_LOCAL_BACKEND=1'
    : `this executor does not run the ${backend} backend`;
}
