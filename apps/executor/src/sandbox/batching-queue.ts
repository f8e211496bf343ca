/**
 * Runs requests in batches: at most `concurrency` batches at once. A request that arrives
 * while they are all busy waits, and the next batch takes every waiting request of the same
 * kind (up to `maxBatch`), so a burst of N requests costs a few batches instead of N runs.
 * A request arriving while a slot is free starts at once, alone: no request waits for others.
 */
export class BatchingQueue<T, R> {
  private readonly waiting: Array<{ item: T; resolve: (result: R) => void; reject: (err: unknown) => void }> = [];
  private running = 0;

  constructor(
    /** Does a whole batch; answers one result per item, in order, or throws for all of them. */
    private readonly work: (items: T[]) => Promise<R[]>,
    private readonly options: {
      concurrency: number;
      maxBatch: number;
      /** Items of different kinds never share a batch. */
      kindOf?: (item: T) => string;
    },
  ) {}

  run(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.startBatches();
    });
  }

  private startBatches(): void {
    while (this.running < this.options.concurrency && this.waiting.length > 0) {
      const kindOf = this.options.kindOf ?? (() => '');
      const kind = kindOf(this.waiting[0].item);
      const batch: typeof this.waiting = [];
      for (let i = 0; i < this.waiting.length && batch.length < this.options.maxBatch; ) {
        if (kindOf(this.waiting[i].item) === kind) batch.push(...this.waiting.splice(i, 1));
        else i++;
      }
      this.running++;
      void this.runBatch(batch).finally(() => {
        this.running--;
        this.startBatches();
      });
    }
  }

  private async runBatch(batch: typeof this.waiting): Promise<void> {
    try {
      const results = await this.work(batch.map((b) => b.item));
      batch.forEach((b, i) => (i < results.length ? b.resolve(results[i]) : b.reject(new Error('the batch answered no result for this request'))));
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
