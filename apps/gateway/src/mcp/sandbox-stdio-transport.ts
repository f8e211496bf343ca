/**
 * An MCP client transport to a stdio server that runs inside a session's sandbox.
 *
 * Public surface (everything else here is private):
 *
 *   const transport = factory.create({ tenantId, sessionId }, { command, args?, env?, cwd? });
 *   const client = new Client({ name: 'runbox', version });
 *   await client.connect(transport);   // starts the process in the sandbox, then initializes
 *   ...
 *   await client.close();               // stops the process
 *
 * - `SandboxStdioTransportFactory` (Nest provider, from McpStdioModule): `create(ctx, spec)`.
 * - `SandboxStdioTransport` implements the SDK's `Transport` (start, send, close, onmessage,
 *   onerror, onclose). `executorId` names the executor that holds the sandbox once started:
 *   a caller that also routes tool calls for the session should use it from then on.
 *
 * The bytes never touch the gateway's or the executor's host processes: the executor asks
 * the session's sandbox agent to run the command as the sandbox user (libs/contracts
 * mcp-stdio, deploy/sandbox/agent/runbox_tools/mcp_stdio.py). Messages go out one write at
 * a time, in order (what queues meanwhile goes in the next write); the server's stdout
 * comes back by long-polled reads with a cursor, one JSON-RPC message per line.
 *
 * How it ends, never hanging:
 * - The server exits, or breaks the framing (a line over MCP_STDIO_LIMITS.maxLineBytes,
 *   which the agent answers by stopping it): every request still waiting for an answer
 *   gets a JSON-RPC error naming why, with the tail of the server's stderr, so the SDK
 *   rejects it with that message (a server that dies at start fails `connect` with its
 *   own complaint); then onerror and onclose.
 * - The executor or the sandbox fails (session deleted, no executor answering): the same,
 *   with that reason.
 * - close(): the process is stopped (stdin closed, then terminated), then onclose.
 * A line that is not a JSON-RPC message is reported through onerror and skipped, as the
 * SDK's own stdio transport does.
 */
import { Injectable } from '@nestjs/common';
import { MCP_STDIO_LIMITS, McpStdioEnd, StdioCommand } from '@app/contracts';
import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, isJSONRPCErrorResponse, isJSONRPCRequest, isJSONRPCResultResponse, JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { SandboxStdioClient, SandboxStdioPort, StdioTarget } from './sandbox-stdio.client';

/** How long one read waits in the sandbox for a line before asking again. */
const READ_WAIT_MS = 20_000;
/** Requests remembered as unanswered (to fail them when the server ends); the SDK times out the rest. */
const MAX_UNANSWERED = 10_000;
/** Of the server's stderr, the tail put into error messages. */
const STDERR_IN_ERRORS = 2_000;

export type SandboxStdioSpec = StdioCommand;

interface QueuedSend {
  line: string;
  settle: (err?: Error) => void;
}

export class SandboxStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private state: 'new' | 'starting' | 'open' | 'closed' = 'new';
  private handle = '';
  private executor: string | null = null;
  private cursor = 0;
  private readonly queue: QueuedSend[] = [];
  private flushing = false;
  private readonly unanswered = new Set<RequestId>();
  /** Why the connection ended, for sends that come after. */
  private failure?: Error;

  constructor(
    private readonly port: SandboxStdioPort,
    private readonly target: StdioTarget,
    private readonly spec: SandboxStdioSpec,
    private readonly readWaitMs = READ_WAIT_MS,
  ) {}

  /** The executor holding the sandbox the server runs in, once started. */
  get executorId(): string | null {
    return this.executor;
  }

  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error('SandboxStdioTransport already started; make a new one to reconnect');
    this.state = 'starting';
    try {
      const reply = await this.port.start(this.target, await this.port.executorOf(this.target), this.spec);
      if (!reply.ok) throw new Error(`could not start the MCP server in the sandbox (${reply.error.code}): ${reply.error.message}`);
      this.handle = reply.handle;
      this.executor = reply.executor_id;
    } catch (err) {
      this.state = 'closed';
      throw err;
    }
    if (this.state !== 'starting') {
      // close() came while it started: it is stopped now that there is a handle to stop.
      await this.stopProcess();
      throw new Error('the transport was closed while the MCP server started');
    }
    this.state = 'open';
    void this.readLoop();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.failure ?? new Error('the MCP server in the sandbox is not connected'));
    const line = serializeMessage(message);
    if (Buffer.byteLength(line) > MCP_STDIO_LIMITS.maxWriteBytes) {
      return Promise.reject(new Error(`an MCP message of ${Buffer.byteLength(line)} bytes is over the ${MCP_STDIO_LIMITS.maxWriteBytes} a stdio write may carry`));
    }
    if (isJSONRPCRequest(message)) this.remember(message.id);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ line, settle: (err) => (err ? reject(err) : resolve()) });
      void this.flush();
    });
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    this.dropQueue(new Error('the transport was closed'));
    if (wasOpen) await this.stopProcess();
    this.onclose?.();
  }

  /** Writes what is queued, one write at a time, so the server reads messages in the order sent. */
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.state === 'open' && this.queue.length > 0) {
        const batch = this.takeBatch();
        let writeError: Error | undefined;
        try {
          const reply = await this.port.write(this.target, this.executor as string, this.handle, batch.map((s) => s.line).join(''));
          // A server that has ended takes no input, like a closed pipe; the read loop is
          // about to report how it ended, which says more than this write could.
          if (!reply.ok && reply.error.code !== 'ended') writeError = new Error(`writing to the MCP server failed (${reply.error.code}): ${reply.error.message}`);
        } catch (err) {
          writeError = new Error(`writing to the MCP server failed: ${messageOf(err)}`);
        }
        for (const item of batch) item.settle(writeError);
        if (writeError) return this.fail(writeError);
      }
    } finally {
      this.flushing = false;
    }
  }

  private takeBatch(): QueuedSend[] {
    const batch = [this.queue.shift() as QueuedSend];
    let bytes = Buffer.byteLength(batch[0].line);
    while (this.queue.length > 0 && bytes + Buffer.byteLength(this.queue[0].line) <= MCP_STDIO_LIMITS.maxWriteBytes) {
      const next = this.queue.shift() as QueuedSend;
      bytes += Buffer.byteLength(next.line);
      batch.push(next);
    }
    return batch;
  }

  /** Long-polls the server's stdout until it ends or the transport closes. */
  private async readLoop(): Promise<void> {
    while (this.state === 'open') {
      let reply;
      try {
        reply = await this.port.read(this.target, this.executor as string, this.handle, this.cursor, this.readWaitMs);
      } catch (err) {
        return this.fail(new Error(`lost the MCP server in the sandbox: ${messageOf(err)}`));
      }
      if (this.state !== 'open') return;
      if (!reply.ok) return this.fail(new Error(`lost the MCP server in the sandbox (${reply.error.code}): ${reply.error.message}`));
      for (const line of reply.lines) this.deliver(line);
      this.cursor = reply.last_seq;
      if (reply.exited) return this.fail(new Error(endMessage(reply.exited)), false);
    }
  }

  private deliver(line: string): void {
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch {
      this.onerror?.(new Error(`the MCP server wrote a line that is not a JSON-RPC message: ${line.slice(0, 200)}`));
      return;
    }
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) this.unanswered.delete(message.id);
    this.onmessage?.(message);
  }

  /**
   * The connection is over: the requests still waiting are answered with `error` (the SDK
   * would only say "Connection closed"), then onerror and onclose. The process is stopped
   * unless it has ended already.
   */
  private async fail(error: Error, stillRunning = true): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'closed';
    this.failure = error;
    this.dropQueue(error);
    for (const id of this.unanswered) {
      this.onmessage?.({ jsonrpc: '2.0', id, error: { code: ErrorCode.ConnectionClosed, message: error.message } });
    }
    this.unanswered.clear();
    this.onerror?.(error);
    if (stillRunning) await this.stopProcess();
    this.onclose?.();
  }

  private dropQueue(error: Error): void {
    for (const item of this.queue.splice(0)) item.settle(error);
  }

  /** Best effort: a sandbox that is gone has nothing left to stop. */
  private async stopProcess(): Promise<void> {
    if (!this.executor) return;
    try {
      await this.port.stop(this.target, this.executor, this.handle);
    } catch {
      // The executor is unreachable: the agent stops the process once it has been idle.
    }
  }

  private remember(id: RequestId): void {
    if (this.unanswered.size >= MAX_UNANSWERED) this.unanswered.delete(this.unanswered.values().next().value as RequestId);
    this.unanswered.add(id);
  }
}

/** Makes SandboxStdioTransports; the one thing other features need from McpStdioModule. */
@Injectable()
export class SandboxStdioTransportFactory {
  constructor(private readonly client: SandboxStdioClient) {}

  create(ctx: StdioTarget, spec: SandboxStdioSpec): SandboxStdioTransport {
    return new SandboxStdioTransport(this.client, { tenantId: ctx.tenantId, sessionId: ctx.sessionId }, spec);
  }
}

function endMessage(end: McpStdioEnd): string {
  const stderr = end.stderr.trim();
  const tail = stderr.length > STDERR_IN_ERRORS ? `…${stderr.slice(-STDERR_IN_ERRORS)}` : stderr;
  return `the MCP server in the sandbox ended: ${end.reason}${tail ? `; its stderr: ${tail}` : ' (nothing on stderr)'}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
