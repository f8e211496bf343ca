/**
 * Keeps a metric label's set of values bounded: the first `limit` distinct values seen keep
 * their own label for the life of the process, every later one is counted as `other`.
 * A value never moves from one label to another, so each series stays a true counter
 * (a "top N right now" would move counts between series and break rate()).
 */
export class BoundedLabels {
  static readonly OTHER = 'other';
  private readonly kept = new Set<string>();

  constructor(private readonly limit: number) {}

  label(value: string): string {
    if (this.kept.has(value)) return value;
    if (this.kept.size >= this.limit) return BoundedLabels.OTHER;
    this.kept.add(value);
    return value;
  }

  /** How many values have a label of their own. */
  get size(): number {
    return this.kept.size;
  }
}
