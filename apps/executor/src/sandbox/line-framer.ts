/** A line longer than the framer's limit: the peer is not speaking the protocol. */
export class FrameTooLongError extends Error {
  constructor(readonly limit: number) {
    super(`a line of more than ${limit} bytes without a newline`);
  }
}

/**
 * Splits a byte stream into newline-terminated lines while holding at most `maxLineBytes`
 * of an unfinished one. Each byte is looked at once (only the new chunk is searched for a
 * newline), so a peer sending megabytes without a newline costs linear time and bounded
 * memory, never the quadratic rescans of a growing string.
 */
export class LineFramer {
  private parts: Buffer[] = [];
  private partBytes = 0;

  constructor(private readonly maxLineBytes: number) {}

  /** Bytes held for the line not finished yet. */
  get buffered(): number {
    return this.partBytes;
  }

  /** The complete lines `chunk` finishes, without their newline; throws FrameTooLongError. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    let newline: number;
    while ((newline = chunk.indexOf(0x0a, start)) >= 0) {
      this.hold(chunk.subarray(start, newline));
      lines.push(Buffer.concat(this.parts, this.partBytes).toString('utf8'));
      this.parts = [];
      this.partBytes = 0;
      start = newline + 1;
    }
    if (start < chunk.length) this.hold(chunk.subarray(start));
    return lines;
  }

  private hold(bytes: Buffer): void {
    if (this.partBytes + bytes.length > this.maxLineBytes) {
      this.parts = [];
      this.partBytes = 0;
      throw new FrameTooLongError(this.maxLineBytes);
    }
    // A copy: a subarray would pin the whole 64 KiB chunk it came from.
    if (bytes.length > 0) this.parts.push(Buffer.from(bytes));
    this.partBytes += bytes.length;
  }
}
