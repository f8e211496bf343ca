import { z } from 'zod';
import { EventContract, SMALL_MESSAGE_BYTES } from '../contract';

/**
 * Executor → every gateway (fan-out publish): who it is and how much room it has, at start
 * and every heartbeat while it lives. Gateways place new sessions by it and notice an
 * executor that went quiet (docs/scaling.md).
 */
export const EXECUTOR_ANNOUNCE_SUBJECT = 'runbox.executor.announce.v1';

export const executorAnnouncementSchema = z.object({
  executor_id: z.string().min(1).max(128),
  /** One per process: a restart under the same id announces a new one. */
  instance: z.string().min(1).max(64),
  /** When this process started (ms since the epoch). */
  started_at: z.number().int().nonnegative(),
  /** Sandboxes it holds at most (RUNBOX_EXECUTOR_MAX_SANDBOXES). */
  capacity: z.number().int().nonnegative(),
  /** Sandboxes it holds now. */
  sandboxes: z.number().int().nonnegative(),
  /** Ready containers waiting in its warm pool. */
  warm_pool: z.number().int().nonnegative(),
  version: z.string().max(64),
  /** `ready` takes new sessions; `draining` (stopping) and `decommissioned` take none. */
  state: z.enum(['ready', 'draining', 'decommissioned']),
  /** How often it announces: a gateway counts it lost after three silent intervals. */
  heartbeat_ms: z.number().int().positive(),
});
export type ExecutorAnnouncement = z.infer<typeof executorAnnouncementSchema>;

export const executorAnnounceContract: EventContract<ExecutorAnnouncement> = {
  subject: EXECUTOR_ANNOUNCE_SUBJECT,
  payload: executorAnnouncementSchema,
  maxBytes: SMALL_MESSAGE_BYTES,
};

/** Gateway → every executor: announce now (a gateway that just started need not wait a heartbeat). */
export const EXECUTOR_DISCOVER_SUBJECT = 'runbox.executor.discover.v1';
export const executorDiscoverSchema = z.object({ asked_at: z.number().int().nonnegative() });
export type ExecutorDiscover = z.infer<typeof executorDiscoverSchema>;
export const executorDiscoverContract: EventContract<ExecutorDiscover> = {
  subject: EXECUTOR_DISCOVER_SUBJECT,
  payload: executorDiscoverSchema,
  maxBytes: SMALL_MESSAGE_BYTES,
};

/**
 * Gateway → every gateway and executor: an operator decommissioned this executor. It takes
 * no new session; its sessions are released per RUNBOX_ON_EXECUTOR_LOSS at once, without
 * waiting for the loss grace.
 */
export const EXECUTOR_DECOMMISSION_SUBJECT = 'runbox.executor.decommission.v1';
export const executorDecommissionSchema = z.object({ executor_id: z.string().min(1).max(128), at: z.number().int().nonnegative() });
export type ExecutorDecommission = z.infer<typeof executorDecommissionSchema>;
export const executorDecommissionContract: EventContract<ExecutorDecommission> = {
  subject: EXECUTOR_DECOMMISSION_SUBJECT,
  payload: executorDecommissionSchema,
  maxBytes: SMALL_MESSAGE_BYTES,
};
