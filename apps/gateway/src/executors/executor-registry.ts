import { ExecutorAnnouncement } from '@app/contracts';

/** How many silent heartbeats make an executor lost. */
export const MISSED_HEARTBEATS_FOR_LOSS = 3;

/**
 * Where a session's executor stands, for its next call:
 * - `serving`: heard from within three heartbeats (draining or not: it finishes what it has);
 * - `lost`: silent for longer, within the grace: calls answer 503 with Retry-After;
 * - `gone`: silent past the grace, or decommissioned: RUNBOX_ON_EXECUTOR_LOSS applies.
 */
export type ExecutorStanding =
  | { kind: 'serving' }
  | { kind: 'lost'; silentMs: number; graceLeftMs: number }
  | { kind: 'gone'; why: 'lost' | 'decommissioned'; silentMs: number };

export interface ExecutorView {
  id: string;
  capacity: number;
  sandboxes: number;
  warmPool: number;
  version: string;
  state: ExecutorAnnouncement['state'];
  lastSeenMs: number;
  standing: ExecutorStanding['kind'];
}

interface Entry {
  announcement: ExecutorAnnouncement;
  seenAt: number;
  /**
   * When this gateway placed sessions here lately. An announcement counts a session once
   * the executor has it, so placements younger than one heartbeat stay counted on top of
   * it (briefly counting one twice errs toward spreading, never toward overfilling), unless
   * an announcement asked for after the placement's call ended counts it (`recounted`).
   */
  placements: Placement[];
}

interface Placement {
  at: number;
  /** When the executor's answer to the placing call came back: it holds the session by then. */
  settledAt?: number;
}

/**
 * The executors this gateway has heard from, kept in memory from their announcements
 * (every gateway hears every announcement, so each keeps the same picture within a
 * heartbeat). It answers two questions: where a new session goes (most free capacity),
 * and whether a session's executor still serves (docs/scaling.md).
 */
export class ExecutorRegistry {
  private readonly entries = new Map<string, Entry>();
  /** Decommissions heard, by executor id, with when: they hold until a process started later announces. */
  private readonly decommissioned = new Map<string, number>();
  private readonly startedAt: number;

  constructor(
    private readonly graceMs: number,
    /** Loss window for an executor never heard from (this gateway's own heartbeat setting). */
    private readonly defaultHeartbeatMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  /** Records an announcement; false when it was older news than what is known (a previous process). */
  heard(announcement: ExecutorAnnouncement): boolean {
    const known = this.entries.get(announcement.executor_id);
    if (known && known.announcement.instance !== announcement.instance && known.announcement.started_at > announcement.started_at) return false;
    const now = this.now();
    const placements = (known?.placements ?? []).filter((p) => now - p.at < announcement.heartbeat_ms);
    this.entries.set(announcement.executor_id, { announcement, seenAt: now, placements });
    const decommissionedAt = this.decommissioned.get(announcement.executor_id);
    // An executor started again after its decommission is in service again: the operator brought it back.
    if (decommissionedAt !== undefined && announcement.started_at > decommissionedAt && announcement.state !== 'decommissioned') {
      this.decommissioned.delete(announcement.executor_id);
    }
    return true;
  }

  decommission(executorId: string, at = this.now()): void {
    this.decommissioned.set(executorId, at);
  }

  /**
   * Counts a session placed on `executorId`, until its next announcement counts it itself.
   * Call the answer when the placing call has ended, so `recounted` can stop counting it.
   */
  placed(executorId: string): () => void {
    const placement: Placement = { at: this.now() };
    this.entries.get(executorId)?.placements.push(placement);
    return () => (placement.settledAt ??= this.now());
  }

  /** The registry's clock, for `recounted`. */
  mark(): number {
    return this.now();
  }

  /**
   * After announcements asked for at `askedAt` came in: an executor that announced since
   * then counted every session whose placing call had ended before, so those placements
   * stop counting twice. Without this a burst of new sessions on a nearly full executor
   * counts each one twice for a heartbeat and is refused as "no room" while room is left.
   */
  recounted(askedAt: number): void {
    for (const entry of this.entries.values()) {
      if (entry.seenAt < askedAt) continue;
      entry.placements = entry.placements.filter((p) => p.settledAt === undefined || p.settledAt > askedAt);
    }
  }

  standing(executorId: string): ExecutorStanding {
    const entry = this.entries.get(executorId);
    // Never heard from since this gateway started: counted as last seen at that start.
    const seenAt = entry?.seenAt ?? this.startedAt;
    const silentMs = Math.max(0, this.now() - seenAt);
    if (this.decommissioned.has(executorId) || entry?.announcement.state === 'decommissioned') return { kind: 'gone', why: 'decommissioned', silentMs };
    const lossMs = MISSED_HEARTBEATS_FOR_LOSS * (entry?.announcement.heartbeat_ms ?? this.defaultHeartbeatMs);
    if (silentMs <= lossMs) return { kind: 'serving' };
    // The grace counts from the last heartbeat, and is never shorter than the loss window.
    const graceMs = Math.max(this.graceMs, lossMs);
    if (silentMs <= graceMs) return { kind: 'lost', silentMs, graceLeftMs: graceMs - silentMs };
    return { kind: 'gone', why: 'lost', silentMs };
  }

  /**
   * Executors that take new sessions now, most free capacity first (ties in random order,
   * so gateways that see the same numbers do not all pick the same one).
   */
  candidates(exclude: ReadonlySet<string> = new Set()): string[] {
    const open: Array<{ id: string; free: number; tie: number }> = [];
    for (const [id, entry] of this.entries) {
      if (exclude.has(id) || entry.announcement.state !== 'ready' || this.standing(id).kind !== 'serving') continue;
      const free = entry.announcement.capacity - entry.announcement.sandboxes - entry.placements.length;
      if (free > 0) open.push({ id, free, tie: Math.random() });
    }
    return open.sort((a, b) => b.free - a.free || a.tie - b.tie).map((c) => c.id);
  }

  /** Whether any executor was ever heard from (a gateway that just started may not have yet). */
  get empty(): boolean {
    return this.entries.size === 0;
  }

  list(): ExecutorView[] {
    return [...this.entries.entries()]
      .map(([id, { announcement: a, seenAt, placements }]) => ({
        id,
        capacity: a.capacity,
        sandboxes: a.sandboxes + placements.length,
        warmPool: a.warm_pool,
        version: a.version,
        state: this.decommissioned.has(id) ? 'decommissioned' : a.state,
        lastSeenMs: Math.max(0, this.now() - seenAt),
        standing: this.standing(id).kind,
      }))
      .sort((a, b) => a.id.localeCompare(b.id));
  }
}
