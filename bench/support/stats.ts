/**
 * The nearest-rank percentile of `samples` (in any order): the smallest sample with at
 * least p% of all samples at or below it. Every bench reports p50/p99 with this one.
 */
export function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Runs `work` `n` times, one after another; the wall time of each run, in ms. */
export async function timeIt(n: number, work: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await work();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}
