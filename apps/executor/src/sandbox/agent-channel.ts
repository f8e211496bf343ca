import { randomUUID } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { ToolResult, toolResultSchema } from '@app/contracts';
import { z } from 'zod';

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
  private buffer = '';
  private closedReason: string | undefined;
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
    output.setEncoding('utf8');
    output.on('data', (chunk: string) => this.receive(chunk, markAttached));
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
        reject(new ChannelTimeoutError(op, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.input.write(JSON.stringify({ id, op, args }) + '\n');
    });
  }

  close(reason = 'closed by the executor'): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new ChannelClosedError(reason));
      this.pending.delete(id);
    }
    this.input.end();
    this.onClose();
  }

  private receive(chunk: string, markAttached: () => void): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (line.trim()) this.handleLine(line, markAttached);
    }
  }

  private handleLine(line: string, markAttached: () => void): void {
    let parsed: z.infer<typeof responseSchema>;
    try {
      parsed = responseSchema.parse(JSON.parse(line));
    } catch {
      return; // not a frame of ours (e.g. a stray print); the protocol is lines of JSON
    }
    if (parsed.event === 'attached') return markAttached();
    if (parsed.id === null) return;
    const waiter = this.pending.get(parsed.id);
    if (!waiter) return;
    this.pending.delete(parsed.id);
    clearTimeout(waiter.timer);
    if (parsed.result) waiter.resolve(parsed.result);
    else waiter.reject(new Error(parsed.error ? `${parsed.error.code}: ${parsed.error.message}` : 'empty reply'));
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
