/**
 * The tool calls this executor is working on, so a drain can wait for them. Each is bounded
 * by its own time limit (the channel gives up past it), so waiting for all of them ends.
 */
export class InFlightCalls {
  private readonly calls = new Set<Promise<unknown>>();

  get count(): number {
    return this.calls.size;
  }

  /** Runs `work`, counted until it settles. */
  track<T>(work: () => Promise<T>): Promise<T> {
    const running = work();
    this.calls.add(running);
    const done = () => this.calls.delete(running);
    running.then(done, done);
    return running;
  }

  /** Resolves once every call counted now, and any that started meanwhile, has settled. */
  async settled(): Promise<void> {
    while (this.calls.size > 0) await Promise.allSettled([...this.calls]);
  }
}
