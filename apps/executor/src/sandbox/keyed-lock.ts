/**
 * Runs async work one at a time per key, in arrival order. A session's lifecycle steps
 * (create, reap, release, replace) go through it, so a reap can never pull a container out
 * from under its own re-creation, and two first calls never make two containers.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  /** True while work for `key` is running or queued. */
  has(key: string): boolean {
    return this.tails.has(key);
  }

  keys(): Set<string> {
    return new Set(this.tails.keys());
  }

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
