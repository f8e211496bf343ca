/**
 * Where a live session's tool calls went recently, so a burst of direct tool calls does not
 * pay a tenant transaction each (about 6 ms of a terminal round trip). An entry is made
 * only from a database check that found the session live and the tenant's, and lives
 * `ttlMs` from that check at most (a hit does not extend it).
 *
 * Safe to skip the check meanwhile because the executor refuses on its own: it runs a call
 * only for a sandbox it holds for that same tenant, or, holding none, after reading the
 * session as live for that tenant (SandboxService.usable and adoptOrCreate ->
 * SandboxRepository.findForCall). Deleting a session on this replica forgets it at once;
 * deleted on another replica, its executor releases the sandbox, so calls routed from here
 * within the TTL get the executor's not-found.
 */
export class SessionRouteCache {
  private readonly entries = new Map<string, { executorId: string; expires: number }>();
  /** When each session was last forgotten: a call checked before then must not cache it again. */
  private readonly forgotten = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The executor of a session checked live less than ttlMs ago, or undefined. */
  get(tenantId: string, sessionId: string): string | undefined {
    const key = keyOf(tenantId, sessionId);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expires <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.executorId;
  }

  /** `checkedAt`: when the database said the session was live (the entry expires from then). */
  set(tenantId: string, sessionId: string, executorId: string, checkedAt: number): void {
    const key = keyOf(tenantId, sessionId);
    const forgottenAt = this.forgotten.get(key);
    if (forgottenAt !== undefined) {
      if (forgottenAt >= checkedAt) return; // deleted (or failed) while this call ran
      if (forgottenAt + this.ttlMs < this.now()) this.forgotten.delete(key);
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, { executorId, expires: checkedAt + this.ttlMs });
  }

  forget(tenantId: string, sessionId: string): void {
    const key = keyOf(tenantId, sessionId);
    this.entries.delete(key);
    if (this.forgotten.size >= this.maxEntries) this.forgotten.clear();
    this.forgotten.set(key, this.now());
  }

  /** The clock the entries are timed by, for callers to stamp their checks with. */
  time(): number {
    return this.now();
  }
}

function keyOf(tenantId: string, sessionId: string): string {
  return `${tenantId}\n${sessionId}`;
}
