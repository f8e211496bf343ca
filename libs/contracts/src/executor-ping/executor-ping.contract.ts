import { z } from 'zod';

/** Readiness: any executor answers with who it is and whether its Docker engine answers. */
export const EXECUTOR_PING_SUBJECT = 'runbox.executor.ping.v1';

export const executorPingSchema = z.object({});
export const executorPingReplySchema = z.object({
  executor_id: z.string(),
  docker: z.boolean(),
  sandboxes: z.number().int().nonnegative(),
});
export type ExecutorPingReply = z.infer<typeof executorPingReplySchema>;
