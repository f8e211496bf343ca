import { z } from 'zod';
import { pinnedSubject, RequestContract, rpcFailure, rpcFailureSchema, SMALL_MESSAGE_BYTES } from '../contract';
import { ids } from '../tool-result';

/**
 * Gateway → executors: the session is deleted; remove its container and volume.
 * Request/reply on the queue-group subject or the pinned executor's subject.
 */
export const SESSION_RELEASE_SUBJECT = 'runbox.executor.session.release.v1';
export const pinnedSessionReleaseSubject = (executorId: string): string => pinnedSubject(SESSION_RELEASE_SUBJECT, executorId);

export const sessionReleaseSchema = z.object({ tenant_id: ids.tenant, session_id: ids.session });
export type SessionRelease = z.infer<typeof sessionReleaseSchema>;

export const sessionReleaseReplySchema = z.union([z.object({ removed: z.boolean(), executor_id: z.string() }), rpcFailureSchema]);
export type SessionReleaseReply = z.infer<typeof sessionReleaseReplySchema>;

export const sessionReleaseContract: RequestContract<SessionRelease, SessionReleaseReply> = {
  subject: SESSION_RELEASE_SUBJECT,
  request: sessionReleaseSchema,
  reply: sessionReleaseReplySchema,
  errorReply: rpcFailure,
  maxBytes: SMALL_MESSAGE_BYTES,
};
