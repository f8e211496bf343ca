import { z } from 'zod';
import { EventContract, SMALL_MESSAGE_BYTES } from '../contract';
import { ids } from '../tool-result';

/** Gateway → all executors (fan-out publish): interrupt an in-flight call, e.g. on run cancel. */
export const TOOL_CANCEL_SUBJECT = 'runbox.executor.tool.cancel.v1';

export const toolCancelSchema = z.object({
  tenant_id: ids.tenant,
  session_id: ids.session,
  call_id: z.string().min(1).max(128),
});
export type ToolCancel = z.infer<typeof toolCancelSchema>;

export const toolCancelContract: EventContract<ToolCancel> = { subject: TOOL_CANCEL_SUBJECT, payload: toolCancelSchema, maxBytes: SMALL_MESSAGE_BYTES };
