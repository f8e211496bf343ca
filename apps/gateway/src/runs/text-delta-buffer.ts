/**
 * Gathers streamed answer text into `message.delta` events a few per second rather than
 * one per token: every event is a stored row, and clients render small batches just as well.
 */
export class TextDeltaBuffer {
  private pending = '';
  private timer?: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly emit: (text: string) => Promise<void>,
    private readonly windowMs = 150,
  ) {}

  push(text: string): void {
    if (!text) return;
    this.pending += text;
    this.timer ??= setTimeout(() => void this.drain(), this.windowMs);
  }

  /** Emits what is buffered and waits until every delta so far is stored. */
  async flush(): Promise<void> {
    await this.drain();
    await this.chain;
  }

  private drain(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const text = this.pending;
    this.pending = '';
    if (text) this.chain = this.chain.then(() => this.emit(text)).catch(() => undefined);
    return this.chain;
  }
}
