import { z } from 'zod';
import { RequestContract, rpcFailure, rpcFailureSchema, SMALL_MESSAGE_BYTES } from '../contract';
import { executorAnnouncementSchema } from '../executor-announce/executor-announce.contract';

/**
 * Gateway → one executor (pinned to its id): are you still there? It answers with its
 * announcement. Its process keeps this subscription until it exits, draining or not, so
 * "no responders" here means the process is gone (NATS dropped its connection), while a
 * request that goes unanswered means it is still connected, only slow (docs/scaling.md).
 */
export const EXECUTOR_PRESENCE_SUBJECT = 'runbox.executor.presence.v1';

export const executorPresenceSchema = z.object({});
export const executorPresenceReplySchema = z.union([executorAnnouncementSchema, rpcFailureSchema]);
export type ExecutorPresenceReply = z.infer<typeof executorPresenceReplySchema>;

export const executorPresenceContract: RequestContract<z.infer<typeof executorPresenceSchema>, ExecutorPresenceReply> = {
  subject: EXECUTOR_PRESENCE_SUBJECT,
  request: executorPresenceSchema,
  reply: executorPresenceReplySchema,
  errorReply: rpcFailure,
  maxBytes: SMALL_MESSAGE_BYTES,
};
