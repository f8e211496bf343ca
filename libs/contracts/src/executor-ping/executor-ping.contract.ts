import { z } from 'zod';
import { RequestContract, rpcFailure, rpcFailureSchema, SMALL_MESSAGE_BYTES } from '../contract';

/** Readiness: any executor answers with who it is and whether its Docker engine answers. */
export const EXECUTOR_PING_SUBJECT = 'runbox.executor.ping.v1';

export const executorPingSchema = z.object({});
export const executorReadySchema = z.object({
  executor_id: z.string(),
  docker: z.boolean(),
  sandboxes: z.number().int().nonnegative(),
});
export type ExecutorReady = z.infer<typeof executorReadySchema>;
export const executorPingReplySchema = z.union([executorReadySchema, rpcFailureSchema]);
export type ExecutorPingReply = z.infer<typeof executorPingReplySchema>;

export const executorPingContract: RequestContract<z.infer<typeof executorPingSchema>, ExecutorPingReply> = {
  subject: EXECUTOR_PING_SUBJECT,
  request: executorPingSchema,
  reply: executorPingReplySchema,
  errorReply: rpcFailure,
  maxBytes: SMALL_MESSAGE_BYTES,
};
