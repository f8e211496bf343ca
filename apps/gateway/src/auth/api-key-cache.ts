/**
 * A short-lived cache of key lookups, so authentication is not a database round trip per
 * request. Entries live `ttlMs` at most: a revoked key stops working within that time on
 * every replica, and at once on the replica that revoked it (it calls `forget`).
 */
export class ApiKeyCache<T> {
  private readonly entries = new Map<string, { value: T | null; expires: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(prefix: string): { value: T | null } | undefined {
    const entry = this.entries.get(prefix);
    if (!entry) return undefined;
    if (entry.expires <= this.now()) {
      this.entries.delete(prefix);
      return undefined;
    }
    return { value: entry.value };
  }

  set(prefix: string, value: T | null): void {
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(prefix, { value, expires: this.now() + this.ttlMs });
  }

  forget(prefix: string): void {
    this.entries.delete(prefix);
  }

  clear(): void {
    this.entries.clear();
  }
}
