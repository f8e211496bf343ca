import { z } from 'zod';
import { EventContract, SMALL_MESSAGE_BYTES } from '../contract';
import { ids } from '../tool-result';

/**
 * The durable run queue: a JetStream work-queue stream. Any gateway replica may take a run;
 * Postgres holds its state, so a replica that dies mid-run leaves it for another to resume.
 */
export const RUN_STREAM = 'RUNBOX_RUNS';
export const RUN_QUEUE_SUBJECT = 'runbox.runs.queued.v1';
export const RUN_CONSUMER = 'runbox-run-workers';

/**
 * `session_id`, when the publisher knows it, lets the worker list the session's tools while
 * it claims the run, rather than after.
 */
export const runQueuedSchema = z.object({ tenant_id: ids.tenant, run_id: z.string().min(1).max(64), session_id: ids.session.optional() });
export type RunQueued = z.infer<typeof runQueuedSchema>;

export const runQueuedContract: EventContract<RunQueued> = { subject: RUN_QUEUE_SUBJECT, payload: runQueuedSchema, maxBytes: SMALL_MESSAGE_BYTES };
