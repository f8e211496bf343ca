import { randomUUID } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { ToolResult, toolResultSchema } from '@app/contracts';
import { z } from 'zod';
import { FrameTooLongError, LineFramer } from './line-framer';

/**
 * The longest line the agent may send. The agent keeps its replies under half of this
 * (MAX_REPLY_BYTES in runbox_agent.py), so a longer one means the protocol is broken, and
 * it is also all a channel ever holds of an unfinished line.
 */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** Ids of calls that timed out or were given up, whose late replies are expected and dropped. */
const EXPIRED_IDS_KEPT = 1024;

const responseSchema = z.object({
  id: z.string().nullable(),
  event: z.string().optional(),
  result: toolResultSchema.optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

export class ChannelClosedError extends Error {
  constructor(reason: string) {
    super(`sandbox channel closed: ${reason}`);
  }
}

/**
 * The sandbox sent something the agent never sends: a line too long, not a frame, or a
 * reply to a request that was never made. Nothing it sends is believed after that; its
 * owner stops the sandbox (SandboxService.quarantine).
 */
export class ProtocolViolationError extends ChannelClosedError {
  constructor(readonly violation: string) {
    super(`the sandbox broke the channel protocol: ${violation}`);
  }
}

/** A request id already in flight on this channel: answering both would mix their replies. */
export class DuplicateRequestError extends Error {
  constructor(id: string) {
    super(`a request with id ${id} is already in flight in this sandbox`);
  }
}

export class ChannelTimeoutError extends Error {
  constructor(op: string, ms: number) {
    super(`the sandbox did not answer ${op} within ${ms} ms`);
  }
}

interface Pending {
  resolve: (result: ToolResult) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * A framed JSON-lines connection to the agent inside one sandbox (see
 * deploy/sandbox/agent/runbox_agent.py). Many requests may be in flight at once; replies
 * are matched by id. One channel is opened per sandbox and kept, so a tool call costs a
 * write and a read on an open stream instead of a fresh `docker exec` (~100 ms).
 */
export class AgentChannel {
  private readonly pending = new Map<string, Pending>();
  private readonly expired = new Set<string>();
  private readonly framer = new LineFramer(MAX_FRAME_BYTES);
  private closedReason: string | undefined;
  private violation: string | undefined;
  private readonly violationListeners: Array<(violation: string) => void> = [];
  private readonly attached: Promise<void>;

  constructor(
    private readonly input: Writable,
    output: Readable,
    private readonly onClose: () => void = () => undefined,
    /**
     * The `attach` relay announces itself with an `attached` event once it reached the
     * agent's socket; a direct socket connection (the local backend) is attached already.
     */
    expectHandshake = true,
  ) {
    let markAttached: () => void = () => undefined;
    let failAttach: (err: Error) => void = () => undefined;
    this.attached = new Promise<void>((resolve, reject) => {
      markAttached = resolve;
      failAttach = reject;
    });
    this.attached.catch(() => undefined);
    if (!expectHandshake) markAttached();
    output.on('data', (chunk: Buffer | string) => this.receive(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, markAttached, failAttach));
    const close = (reason: string) => {
      failAttach(new ChannelClosedError(reason));
      this.close(reason);
    };
    output.on('end', () => close('the agent ended the stream'));
    output.on('error', (err) => close(err.message));
    input.on('error', (err) => close(err.message));
  }

  get isOpen(): boolean {
    return this.closedReason === undefined;
  }

  /** Bytes held of a line not finished yet; never more than MAX_FRAME_BYTES. */
  get bufferedBytes(): number {
    return this.framer.buffered;
  }

  /** Called once if the sandbox breaks the protocol (after the channel has closed). */
  onProtocolViolation(listener: (violation: string) => void): void {
    if (this.violation !== undefined) listener(this.violation);
    else this.violationListeners.push(listener);
  }

  /** Resolves once the agent has said it is attached; rejects if the stream closes first. */
  ready(timeoutMs: number): Promise<void> {
    return withTimeout(this.attached, timeoutMs, () => new ChannelTimeoutError('attach', timeoutMs));
  }

  call(op: string, args: Record<string, unknown>, timeoutMs: number, id: string = randomUUID()): Promise<ToolResult> {
    if (this.closedReason !== undefined) return Promise.reject(new ChannelClosedError(this.closedReason));
    if (this.pending.has(id)) return Promise.reject(new DuplicateRequestError(id));
    return new Promise<ToolResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.expire(id);
        reject(new ChannelTimeoutError(op, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.input.write(JSON.stringify({ id, op, args }) + '\n');
    });
  }

  close(reason = 'closed by the executor'): void {
    this.shut(reason, () => new ChannelClosedError(reason));
    this.input.end();
  }

  private shut(reason: string, error: () => Error): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(error());
      this.pending.delete(id);
    }
    this.onClose();
  }

  /**
   * Nothing more is read or believed: pending calls fail, the stream is torn down so the
   * sandbox cannot keep the executor busy, and the owner hears of it to stop the sandbox.
   */
  private violate(violation: string, failAttach: (err: Error) => void): void {
    if (this.closedReason !== undefined) return;
    this.violation = violation;
    const error = () => new ProtocolViolationError(violation);
    failAttach(error());
    this.shut(error().message, error);
    this.input.destroy();
    for (const listener of this.violationListeners.splice(0)) listener(violation);
  }

  private receive(chunk: Buffer, markAttached: () => void, failAttach: (err: Error) => void): void {
    if (this.closedReason !== undefined) return;
    let lines: string[];
    try {
      lines = this.framer.push(chunk);
    } catch (err) {
      if (err instanceof FrameTooLongError) return this.violate(err.message, failAttach);
      throw err;
    }
    for (const line of lines) {
      const violation = this.handleLine(line, markAttached);
      if (violation) return this.violate(violation, failAttach);
    }
  }

  /** Settles the call a reply is for; returns what is wrong with a line that is no reply. */
  private handleLine(line: string, markAttached: () => void): string | undefined {
    let parsed: z.infer<typeof responseSchema>;
    try {
      parsed = responseSchema.parse(JSON.parse(line));
    } catch {
      return `a line that is not a frame (${line.length} characters)`;
    }
    if (parsed.event === 'attached') {
      markAttached();
      return undefined;
    }
    if (parsed.id === null) return 'a reply without a request id';
    const waiter = this.pending.get(parsed.id);
    if (!waiter) return this.expired.delete(parsed.id) ? undefined : 'a reply to a request that was never made';
    this.pending.delete(parsed.id);
    clearTimeout(waiter.timer);
    if (parsed.result) waiter.resolve(parsed.result);
    else waiter.reject(new Error(parsed.error ? `${parsed.error.code}: ${parsed.error.message}` : 'empty reply'));
    return undefined;
  }

  /** Remembers a given-up id (the oldest go first), so its late reply is no violation. */
  private expire(id: string): void {
    if (this.expired.size >= EXPIRED_IDS_KEPT) this.expired.delete(this.expired.values().next().value as string);
    this.expired.add(id);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
