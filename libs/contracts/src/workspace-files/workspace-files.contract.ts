import { z } from 'zod';
import { pinnedSubject, RequestContract, rpcFailure, rpcFailureSchema, SMALL_MESSAGE_BYTES } from '../contract';
import { ids } from '../tool-result';

/**
 * Gateway → executor: a session's workspace files over HTTP (docs/files-api.md). The bytes
 * never travel in these messages: they stream as a tar over a pulled byte stream
 * (libs/messaging byte-stream.ts) whose inbox subject the message names.
 *
 * - read: one file; the executor offers a one-entry tar of it.
 * - write: one file; the gateway offers a one-entry tar the executor pulls into the workspace.
 * - export: a folder; the executor offers its tar.
 * - import: a tar the gateway checked entry by entry while it streams, extracted all or nothing.
 * - delete: a file, or a folder when `recursive`.
 * Any executor may take a request for a session without a sandbox yet (shared subject);
 * otherwise the session's own executor (pinned subject).
 */
export const WORKSPACE_FILES_SUBJECT = 'runbox.executor.workspace-files.v1';

/** A byte stream's subject is a private NATS inbox. */
const streamSubject = z.string().regex(/^_INBOX\.[A-Za-z0-9]{8,64}$/, 'a byte-stream inbox subject');
const path = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), 'no NUL bytes');

const target = {
  tenant_id: ids.tenant,
  session_id: ids.session,
  /** `docker` (default) or `local`: decided by the deployment, never by a tenant. */
  backend: z.enum(['docker', 'local']).default('docker'),
};

export const workspaceFilesRequestSchema = z.discriminatedUnion('op', [
  z.object({ ...target, op: z.literal('read'), path }),
  z.object({ ...target, op: z.literal('write'), path, size: z.number().int().min(0), stream: streamSubject }),
  z.object({ ...target, op: z.literal('export'), path }),
  z.object({ ...target, op: z.literal('import'), path, max_bytes: z.number().int().min(0), stream: streamSubject }),
  z.object({ ...target, op: z.literal('delete'), path, recursive: z.boolean().default(false) }),
]);
export type WorkspaceFilesRequest = z.output<typeof workspaceFilesRequestSchema>;
export type WorkspaceFilesRequestInput = z.input<typeof workspaceFilesRequestSchema>;

export const workspaceFilesReplySchema = z.union([
  z.object({
    ok: z.literal(true),
    executor_id: z.string(),
    /** The path as the workspace shows it (relative, tidied). */
    path: z.string(),
    /** read and export: the tar offered for pulling. */
    stream: streamSubject.optional(),
    /** read: the file's size as it was found. */
    size: z.number().int().min(0).optional(),
    /** delete: what was removed. */
    kind: z.enum(['file', 'dir']).optional(),
  }),
  rpcFailureSchema,
]);
export type WorkspaceFilesReply = z.infer<typeof workspaceFilesReplySchema>;

export const workspaceFilesContract: RequestContract<WorkspaceFilesRequest, WorkspaceFilesReply, WorkspaceFilesRequestInput> = {
  subject: WORKSPACE_FILES_SUBJECT,
  request: workspaceFilesRequestSchema,
  reply: workspaceFilesReplySchema,
  errorReply: rpcFailure,
  maxBytes: SMALL_MESSAGE_BYTES,
};

export const pinnedWorkspaceFilesSubject = (executorId: string): string => pinnedSubject(WORKSPACE_FILES_SUBJECT, executorId);
