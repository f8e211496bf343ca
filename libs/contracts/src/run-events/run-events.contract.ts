import { z } from 'zod';
import { EventContract, SMALL_MESSAGE_BYTES } from '../contract';

/**
 * "Run R has a new event": a core NATS publish after each event is stored, so event streams
 * on any gateway replica wake at once. Postgres has the events themselves; a lost notice only
 * delays a stream until its next poll.
 */
export const RUN_EVENTS_SUBJECT_PREFIX = 'runbox.runs.events.v1';
export const runEventsSubject = (runId: string): string => `${RUN_EVENTS_SUBJECT_PREFIX}.${runId}`;

export const runEventNoticeSchema = z.object({ run_id: z.string().min(1).max(64), seq: z.number().int().positive() });
export type RunEventNotice = z.infer<typeof runEventNoticeSchema>;

/** The notice of one run; `subject` is the prefix, each run's notices go to runEventsSubject(run). */
export const runEventNoticeContract: EventContract<RunEventNotice> = {
  subject: RUN_EVENTS_SUBJECT_PREFIX,
  payload: runEventNoticeSchema,
  maxBytes: SMALL_MESSAGE_BYTES,
};
