import { Injectable } from '@nestjs/common';
import { ToolResult } from '@app/contracts';
import { ExecutorClient, ExecutorUnavailableError } from './executor.client';
import { executorRefusal, ToolInfrastructureError } from './tool-router';

/** Where a path led: a file's bytes, a folder, or an error the tool should report. */
export type ReadOutcome =
  | { kind: 'file'; path: string; bytes: Buffer; sizeBytes: number; truncated: boolean }
  | { kind: 'directory'; path: string }
  | { kind: 'error'; path: string; code: string; message: string };

const GLOB_PAGE = 2_000;
/** Base64 of this many bytes stays well inside NATS' default 1 MB message. */
const WRITE_PIECE_BYTES = 512 * 1024;
/** Large enough for a page of GLOB_PAGE paths (a larger reply travels in pieces). */
const GLOB_PAGE_CHARS = 900_000;

/**
 * Reads and writes a session's workspace for gateway tools (rag_index, web_fetch, browser), through the executor and the
 * sandbox agent like every other file access: paths are contained by the agent, never by
 * the gateway. One instance per tool call; it remembers the executor the session is pinned
 * to, so a call that creates the sandbox pins the calls after it.
 */
export class SandboxFileReader {
  private calls = 0;

  constructor(
    private readonly executor: ExecutorClient,
    private readonly tenantId: string,
    private readonly sessionId: string,
    public executorId: string | null,
    private readonly callId: string,
    private readonly timeoutMs: number,
  ) {}

  /** The raw bytes of a file, at most `maxBytes` of them; `directory` when the path is a folder. */
  async read(path: string, maxBytes: number): Promise<ReadOutcome> {
    // base64 is 4/3 of the bytes: ask for enough characters or the agent's cut corrupts it.
    const result = await this.call('read_bytes', { path, max_bytes: maxBytes }, Math.ceil(maxBytes / 3) * 4 + 1_000);
    const meta = result.metadata;
    if (result.is_error) {
      const code = typeof meta.error_code === 'string' ? meta.error_code : 'error';
      if (code === 'is_a_directory') return { kind: 'directory', path: typeof meta.path === 'string' ? meta.path : path };
      return { kind: 'error', path, code, message: result.output };
    }
    return {
      kind: 'file',
      path: typeof meta.path === 'string' ? meta.path : path,
      bytes: Buffer.from(result.output, 'base64'),
      sizeBytes: typeof meta.size_bytes === 'number' ? meta.size_bytes : 0,
      truncated: meta.truncated === true,
    };
  }

  /**
   * Writes bytes to a workspace file (replacing it), in pieces that each fit one message.
   * Containment is the agent's, as for reads. Returns the agent's error text on failure.
   */
  async write(path: string, bytes: Buffer): Promise<{ ok: true; path: string } | { ok: false; message: string }> {
    let shown = path;
    for (let offset = 0; offset === 0 || offset < bytes.length; offset += WRITE_PIECE_BYTES) {
      const piece = bytes.subarray(offset, offset + WRITE_PIECE_BYTES);
      const result = await this.call('write_bytes', { path, content: piece.toString('base64'), append: offset > 0 }, 2_000);
      if (result.is_error) return { ok: false, message: result.output };
      if (typeof result.metadata.path === 'string') shown = result.metadata.path;
    }
    return { ok: true, path: shown };
  }

  /** Every file under a folder (paths relative to /workspace, in path order; `.git` is never entered). */
  async listFiles(folder: string, maxFiles: number): Promise<{ paths: string[]; complete: boolean; note?: string }> {
    const paths: string[] = [];
    for (let offset = 0; ; ) {
      const result = await this.call(
        'glob',
        { pattern: '**/*', path: folder, sort: 'path', head_limit: GLOB_PAGE, offset },
        GLOB_PAGE_CHARS,
      );
      if (result.is_error) return { paths, complete: false, note: result.output };
      const count = typeof result.metadata.count === 'number' ? result.metadata.count : 0;
      // The page is `count` lines of paths, then a footer after a blank line.
      paths.push(...result.output.split('\n').slice(0, count));
      const next = result.metadata.next_offset;
      if (result.metadata.partial === true) return { paths, complete: false, note: 'the folder listing hit its deadline' };
      if (typeof next !== 'number' || count === 0) return { paths, complete: true };
      if (paths.length >= maxFiles) return { paths: paths.slice(0, maxFiles), complete: false };
      offset = next;
    }
  }

  /** One sandbox file op (read_file, write_bytes, ...) as the agent answers it. */
  async call(tool: string, args: Record<string, unknown>, maxOutputChars: number): Promise<ToolResult> {
    let reply;
    try {
      reply = await this.executor.callTool(
        {
          tenant_id: this.tenantId,
          session_id: this.sessionId,
          call_id: `${this.callId}:${++this.calls}`,
          tool,
          arguments: args,
          max_output_chars: maxOutputChars,
          timeout_ms: this.timeoutMs,
          // This reader parses the output itself: it must never be spilled to a file.
          whole_output: true,
        },
        this.executorId,
      );
    } catch (err) {
      if (err instanceof ExecutorUnavailableError) throw new ToolInfrastructureError(err.message, 'executor_unavailable');
      throw err;
    }
    this.executorId = reply.executor_id;
    if (!reply.ok) throw executorRefusal(reply.error);
    return reply.result;
  }
}

/** Makes a SandboxFileReader for one gateway tool call. */
@Injectable()
export class SandboxFiles {
  constructor(private readonly executor: ExecutorClient) {}

  reader(ctx: { tenantId: string; sessionId: string; executorId: string | null; callId: string; timeoutMs: number }): SandboxFileReader {
    return new SandboxFileReader(this.executor, ctx.tenantId, ctx.sessionId, ctx.executorId, ctx.callId, ctx.timeoutMs);
  }
}
