import { z } from 'zod';
import { pinnedSubject, RequestContract, rpcFailure, rpcFailureSchema, SMALL_MESSAGE_BYTES } from '../contract';
import { ids } from '../tool-result';

/**
 * Gateway → executor: a long-lived stdio process (an MCP server) inside a session's
 * sandbox, with its stdin and stdout carried over request/reply (docs/mcp.md).
 *
 * - start (shared or pinned subject, like a tool call): runs the command in the sandbox,
 *   as the sandbox user, and answers a handle;
 * - write (pinned): queues bytes for its stdin, in the order the writes arrive;
 * - read (pinned): a long poll for the stdout lines after `after` (the caller's cursor,
 *   which also acknowledges every line up to it), and how the process ended once it has;
 * - stop (pinned): closes its stdin, then terminates it.
 * Handles live in the sandbox: a handle is good only with the tenant and session that
 * started it, and dies with the sandbox.
 */
export const MCP_STDIO_START_SUBJECT = 'runbox.executor.mcp-stdio.start.v1';
export const MCP_STDIO_WRITE_SUBJECT = 'runbox.executor.mcp-stdio.write.v1';
export const MCP_STDIO_READ_SUBJECT = 'runbox.executor.mcp-stdio.read.v1';
export const MCP_STDIO_STOP_SUBJECT = 'runbox.executor.mcp-stdio.stop.v1';

/** Bounds every side knows; the agent enforces them in the sandbox. */
export const MCP_STDIO_LIMITS = {
  /** One line of the server's stdout (one JSON-RPC message); a longer one stops the server. */
  maxLineBytes: 1024 * 1024,
  /** The longest a read waits for a line before answering with none. */
  maxReadWaitMs: 25_000,
  /** One write to stdin. */
  maxWriteBytes: 4 * 1024 * 1024,
} as const;

const noNul = (s: string) => !s.includes('\0');
const text = (max: number) => z.string().max(max).refine(noNul, 'no NUL bytes');
const handle = z.string().min(1).max(128);
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name ([A-Za-z_][A-Za-z0-9_]*)').max(256);

/** The process to run, as a tenant configures a stdio MCP server. */
export const stdioCommandSchema = z.object({
  command: text(4096).min(1),
  args: z.array(text(32_768)).max(256).default([]),
  env: z
    .record(envName, text(32_768))
    .refine((env) => Object.keys(env).length <= 128, 'at most 128 variables')
    .default({}),
  /** Inside the workspace (relative to it, or an absolute path under /workspace); the workspace when omitted. */
  cwd: text(4096).min(1).optional(),
});
export type StdioCommand = z.input<typeof stdioCommandSchema>;

const target = {
  tenant_id: ids.tenant,
  session_id: ids.session,
  /** `docker` (default) or `local`: decided by the deployment, never by a tenant. */
  backend: z.enum(['docker', 'local']).default('docker'),
};

export const mcpStdioStartSchema = z.object({ ...target, ...stdioCommandSchema.shape });
export const mcpStdioWriteSchema = z.object({ ...target, handle, data: z.string().min(1).max(MCP_STDIO_LIMITS.maxWriteBytes) });
export const mcpStdioReadSchema = z.object({
  ...target,
  handle,
  after: z.number().int().min(0),
  wait_ms: z.number().int().min(0).max(MCP_STDIO_LIMITS.maxReadWaitMs),
});
export const mcpStdioStopSchema = z.object({ ...target, handle });
/** Requests as the executor receives them (defaults filled in). */
export type McpStdioStartRequest = z.output<typeof mcpStdioStartSchema>;
export type McpStdioWriteRequest = z.output<typeof mcpStdioWriteSchema>;
export type McpStdioReadRequest = z.output<typeof mcpStdioReadSchema>;
export type McpStdioStopRequest = z.output<typeof mcpStdioStopSchema>;

/** How the process ended: its exit code (null when unknown), why, and the tail of its stderr. */
export const mcpStdioEndSchema = z.object({ exit_code: z.number().int().nullable(), reason: z.string(), stderr: z.string() });
export type McpStdioEnd = z.infer<typeof mcpStdioEndSchema>;

const ok = { ok: z.literal(true), executor_id: z.string() };
const failure = rpcFailureSchema;
export const mcpStdioStartReplySchema = z.union([z.object({ ...ok, handle, pid: z.number().int() }), failure]);
export const mcpStdioWriteReplySchema = z.union([z.object({ ...ok, accepted_bytes: z.number().int() }), failure]);
export const mcpStdioReadReplySchema = z.union([
  z.object({ ...ok, lines: z.array(z.string()), last_seq: z.number().int().min(0), exited: mcpStdioEndSchema.nullable() }),
  failure,
]);
export const mcpStdioStopReplySchema = z.union([z.object({ ...ok, stderr: z.string() }), failure]);
export type McpStdioStartReply = z.infer<typeof mcpStdioStartReplySchema>;
export type McpStdioWriteReply = z.infer<typeof mcpStdioWriteReplySchema>;
export type McpStdioReadReply = z.infer<typeof mcpStdioReadReplySchema>;
export type McpStdioStopReply = z.infer<typeof mcpStdioStopReplySchema>;

type Contract<S extends z.ZodType, R extends z.ZodType> = RequestContract<z.output<S>, z.infer<R>, z.input<S>>;

export const mcpStdioStartContract: Contract<typeof mcpStdioStartSchema, typeof mcpStdioStartReplySchema> = {
  subject: MCP_STDIO_START_SUBJECT,
  request: mcpStdioStartSchema,
  reply: mcpStdioStartReplySchema,
  errorReply: rpcFailure,
  // A command line and its environment: up to 256 arguments and 128 variables of 32 KiB.
  maxBytes: 16 * 1024 * 1024,
};
export const mcpStdioWriteContract: Contract<typeof mcpStdioWriteSchema, typeof mcpStdioWriteReplySchema> = {
  subject: MCP_STDIO_WRITE_SUBJECT,
  request: mcpStdioWriteSchema,
  reply: mcpStdioWriteReplySchema,
  errorReply: rpcFailure,
  // 4 Mi characters, as UTF-8 and escaped as JSON, stay under eight times as many bytes.
  maxBytes: 8 * MCP_STDIO_LIMITS.maxWriteBytes,
};
export const mcpStdioReadContract: Contract<typeof mcpStdioReadSchema, typeof mcpStdioReadReplySchema> = {
  subject: MCP_STDIO_READ_SUBJECT,
  request: mcpStdioReadSchema,
  reply: mcpStdioReadReplySchema,
  errorReply: rpcFailure,
  // The agent answers at most 2 MiB of escaped lines plus 64 KiB of stderr.
  maxBytes: 4 * 1024 * 1024,
};
export const mcpStdioStopContract: Contract<typeof mcpStdioStopSchema, typeof mcpStdioStopReplySchema> = {
  subject: MCP_STDIO_STOP_SUBJECT,
  request: mcpStdioStopSchema,
  reply: mcpStdioStopReplySchema,
  errorReply: rpcFailure,
  maxBytes: SMALL_MESSAGE_BYTES + 1024 * 1024,
};

export const pinnedMcpStdioSubject = (subject: string, executorId: string): string => pinnedSubject(subject, executorId);
