import { z } from 'zod';
import { pinnedSubject, RequestContract, rpcFailure } from '../contract';
import { ids, rpcErrorSchema, toolResultSchema } from '../tool-result';

/**
 * Gateway → executor: run one sandbox tool. Request/reply on core NATS.
 * New sessions go to the queue-group subject (any executor); once a session has a sandbox
 * it is pinned, and calls go to that executor's own subject.
 * A reply that never comes means "outcome unknown": the caller must not re-run blindly.
 */
export const TOOL_CALL_SUBJECT = 'runbox.executor.tool.call.v1';
export const EXECUTOR_QUEUE_GROUP = 'runbox-executors';
export const pinnedToolCallSubject = (executorId: string): string => pinnedSubject(TOOL_CALL_SUBJECT, executorId);

export const toolCallRequestSchema = z.object({
  tenant_id: ids.tenant,
  session_id: ids.session,
  /** Unique per call; used to cancel it. */
  call_id: z.string().min(1).max(128),
  tool: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()),
  max_output_chars: z.number().int().positive().max(10_000_000),
  /** The tool's own time limit; the executor adds a margin before giving up on the sandbox. */
  timeout_ms: z.number().int().positive().max(3_600_000),
  /**
   * How long the call may wait for the session's sandbox to be made (or adopted) before
   * the executor answers `sandbox_starting`, nothing run; the tool's own limit counts from
   * when the sandbox is ready. The caller waits this long on top of `timeout_ms`, so an
   * answer always comes before it gives up. Unset: the start takes as long as it takes.
   */
  start_timeout_ms: z.number().int().positive().max(600_000).optional(),
  /** `docker` (default) or `local` (operator-enabled, no isolation). */
  backend: z.enum(['docker', 'local']).default('docker'),
  /**
   * The caller reads the output itself (a gateway tool reading the workspace), so it needs
   * all of it: an output too large for one message travels in pieces instead of spilling
   * to a workspace file.
   */
  whole_output: z.boolean().optional(),
});
export type ToolCallRequest = z.input<typeof toolCallRequestSchema>;

/**
 * The error code of a call whose sandbox was not ready within its `start_timeout_ms`:
 * nothing ran, and the sandbox goes on starting on that executor.
 */
export const SANDBOX_STARTING = 'sandbox_starting';

export const toolCallReplySchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), executor_id: z.string(), result: toolResultSchema }),
  z.object({ ok: z.literal(false), executor_id: z.string(), error: rpcErrorSchema }),
]);
export type ToolCallReply = z.infer<typeof toolCallReplySchema>;

/**
 * A tool call's arguments (write_file content) and its result (read_bytes) may be large:
 * 256 MiB holds write_file's 50,000,000 characters in any encoding.
 */
export const toolCallContract: RequestContract<z.output<typeof toolCallRequestSchema>, ToolCallReply, ToolCallRequest> = {
  subject: TOOL_CALL_SUBJECT,
  request: toolCallRequestSchema,
  reply: toolCallReplySchema,
  errorReply: rpcFailure,
  maxBytes: 256 * 1024 * 1024,
};
