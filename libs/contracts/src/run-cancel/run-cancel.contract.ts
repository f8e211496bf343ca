import { z } from 'zod';
import { EventContract, SMALL_MESSAGE_BYTES } from '../contract';

/**
 * "Stop run R now": a core NATS publish to every gateway replica after a run was cancelled
 * in Postgres. The replica executing it aborts its model call and tool calls at once; the
 * others ignore it. A lost notice only delays the stop until that worker's next heartbeat,
 * which reads the run's status.
 */
export const RUN_CANCEL_SUBJECT = 'runbox.runs.cancel.v1';

export const runCancelSchema = z.object({ run_id: z.string().min(1).max(64) });
export type RunCancel = z.infer<typeof runCancelSchema>;

export const runCancelContract: EventContract<RunCancel> = { subject: RUN_CANCEL_SUBJECT, payload: runCancelSchema, maxBytes: SMALL_MESSAGE_BYTES };
