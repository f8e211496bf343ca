import { ApiError, RunboxError } from './errors';
import { PagedList } from './pagination';
import { RequestOptions, Transport } from './transport';
import { CreateSessionBody, FileWriteResult, SessionInfo, SessionListParams, ToolResult } from './types';

const enc = encodeURIComponent;

/** A workspace path as the files routes take it: each segment encoded, slashes kept. */
export function filePathSegment(path: string): string {
  const trimmed = path.replace(/^\/+/, '');
  if (trimmed === '') throw new RunboxError('a file path is required');
  return trimmed.split('/').map(enc).join('/');
}

/** Sessions: a sandbox (or a registered server) and a message history that runs share. */
export class Sessions {
  constructor(private readonly transport: Transport) {}

  async create(body: CreateSessionBody = {}, options: RequestOptions = {}): Promise<Session> {
    const info = await this.transport.json<SessionInfo>({ ...options, method: 'POST', path: '/v1/sessions', json: body });
    return new Session(this.transport, info.id, info);
  }

  async get(sessionId: string, options: RequestOptions = {}): Promise<Session> {
    const info = await this.transport.json<SessionInfo>({ ...options, method: 'GET', path: `/v1/sessions/${enc(sessionId)}` });
    return new Session(this.transport, info.id, info);
  }

  /** Sessions newest first; `await` for the page or `for await` over the sessions. */
  list(params: SessionListParams = {}, options: RequestOptions = {}): PagedList<SessionInfo> {
    return new PagedList<SessionInfo>((cursor, opts) => this.transport.json({ ...opts, method: 'GET', path: '/v1/sessions', query: { ...params, cursor } }), options);
  }

  /** Deletes the session; its sandbox container and workspace go with it. */
  async delete(sessionId: string, options: RequestOptions = {}): Promise<void> {
    await this.transport.json({ ...options, method: 'DELETE', path: `/v1/sessions/${enc(sessionId)}` });
  }

  /** A handle on a session by id, without asking the server (calls on it fail with NotFoundError if it is gone). */
  ref(sessionId: string): Session {
    return new Session(this.transport, sessionId);
  }
}

/** One session, with its sandbox's tools, files and commands. */
export class Session {
  readonly tools: SessionTools;
  readonly files: SessionFiles;
  readonly commands: SessionCommands;

  constructor(
    private readonly transport: Transport,
    readonly id: string,
    /** The session as the server last described it (absent on a handle from `ref`). */
    readonly info?: SessionInfo,
  ) {
    this.tools = new SessionTools(transport, id);
    this.files = new SessionFiles(transport, id, this.tools);
    this.commands = new SessionCommands(this.tools);
  }

  delete(options: RequestOptions = {}): Promise<void> {
    return new Sessions(this.transport).delete(this.id, options);
  }
}

export class SessionTools {
  constructor(
    private readonly transport: Transport,
    private readonly sessionId: string,
  ) {}

  /**
   * Runs one tool in the session's sandbox, with no model. A tool that ran and failed answers
   * `is_error: true` (not an exception); an exception means the call itself was refused.
   */
  call(name: string, args: Record<string, unknown> = {}, options: RequestOptions = {}): Promise<ToolResult> {
    return this.transport.json<ToolResult>({
      ...options,
      method: 'POST',
      path: `/v1/sessions/${enc(this.sessionId)}/tools/${enc(name)}`,
      json: { arguments: args },
    });
  }
}

export interface FileEntry {
  /** Workspace-relative path; folders end without the slash here. */
  path: string;
  type: 'file' | 'dir' | 'symlink';
  /** Where a symbolic link points. */
  target?: string;
}

export type FileData = string | Uint8Array | Blob | ReadableStream<Uint8Array>;

export class SessionFiles {
  constructor(
    private readonly transport: Transport,
    private readonly sessionId: string,
    private readonly tools: SessionTools,
  ) {}

  private path(path: string): string {
    return `/v1/sessions/${enc(this.sessionId)}/files/${filePathSegment(path)}`;
  }

  /** A workspace file's bytes. */
  async read(path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    const res = await this.transport.send({ ...options, method: 'GET', path: this.path(path) });
    return new Uint8Array(await res.arrayBuffer());
  }

  /** A workspace file as UTF-8 text. */
  async readText(path: string, options: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, options));
  }

  /** A workspace file as a stream, for files too big to hold in memory. */
  async readStream(path: string, options: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const res = await this.transport.send({ ...options, method: 'GET', path: this.path(path) });
    if (!res.body) throw new RunboxError(`no body in the answer for ${path}`);
    return res.body;
  }

  /**
   * Writes a file (parent folders are created), replacing what was there. The server needs
   * the size up front, so a ReadableStream is read into memory first: for big files pass a
   * Blob, which is sent as it is read (in Node, `await fs.openAsBlob(path)`).
   */
  async write(path: string, data: FileData, options: RequestOptions = {}): Promise<FileWriteResult> {
    const body = typeof data === 'string' ? new TextEncoder().encode(data) : data instanceof ReadableStream ? await new Response(data).blob() : data;
    return this.transport.json<FileWriteResult>({ ...options, method: 'PUT', path: this.path(path), body });
  }

  /** Removes a file; a folder only with `recursive`. */
  async remove(path: string, options: RequestOptions & { recursive?: boolean } = {}): Promise<void> {
    const { recursive, ...rest } = options;
    await this.transport.json({ ...rest, method: 'DELETE', path: this.path(path), query: recursive ? { recursive: true } : undefined });
  }

  /** The entries of a workspace folder (default the workspace root), through the list_files tool. */
  async list(path = '.', options: RequestOptions & { recursive?: boolean } = {}): Promise<FileEntry[]> {
    const { recursive, ...rest } = options;
    const result = await this.tools.call('list_files', { path, ...(recursive ? { recursive: true } : {}) }, rest);
    if (result.is_error) throw new ApiError(400, String(result.metadata.code ?? 'tool_error'), result.output);
    if (result.output === '(empty directory)') return [];
    return result.output
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('… '))
      .map(parseListLine);
  }
}

function parseListLine(line: string): FileEntry {
  if (line.endsWith('/')) return { path: line.slice(0, -1), type: 'dir' };
  const arrow = line.indexOf(' -> ');
  if (arrow >= 0) return { path: line.slice(0, arrow), type: 'symlink', target: line.slice(arrow + 4) };
  return { path: line, type: 'file' };
}

export interface CommandResult {
  /** Standard output (trailing newlines dropped, as the terminal tool reports it). */
  stdout: string;
  stderr: string;
  /** Null when the command did not exit (timed out, or still running as a background job). */
  exitCode: number | null;
  timedOut: boolean;
  /** The terminal tool's whole report, as a model sees it. */
  output: string;
  metadata: Record<string, unknown>;
}

export interface RunCommandOptions extends RequestOptions {
  /** Kill the command after this many seconds (default 120, at most 900). */
  timeoutSeconds?: number;
}

const DEFAULT_COMMAND_TIMEOUT_SECONDS = 120;

export class SessionCommands {
  constructor(private readonly tools: SessionTools) {}

  /**
   * Runs a shell command in the session's persistent shell (cd and exported variables stay)
   * and waits for it to end, up to `timeoutSeconds`.
   */
  async run(command: string, options: RunCommandOptions = {}): Promise<CommandResult> {
    const { timeoutSeconds, ...rest } = options;
    const seconds = timeoutSeconds ?? DEFAULT_COMMAND_TIMEOUT_SECONDS;
    // The call waits past the timeout, or a slow command would go on as a background job.
    const args = { command, timeout_seconds: seconds, max_wait_ms: seconds * 1000 + 1000 };
    const result = await this.tools.call('terminal', args, rest);
    const { stdout, stderr } = splitStreams(result.output);
    const code = result.metadata.exit_code;
    return {
      stdout,
      stderr,
      exitCode: typeof code === 'number' ? code : null,
      timedOut: result.metadata.timed_out === true,
      output: result.output,
      metadata: result.metadata,
    };
  }
}

/** The `stdout:` and `stderr:` sections of the terminal tool's report (see docs/sandbox.md). */
export function splitStreams(output: string): { stdout: string; stderr: string } {
  const lines = output.split('\n');
  const sections: Record<'stdout' | 'stderr', string[]> = { stdout: [], stderr: [] };
  let current: 'stdout' | 'stderr' | undefined;
  for (const line of lines) {
    const header = /^(stdout|stderr)( so far)?:$/.exec(line);
    if (header && (current === undefined || (current === 'stdout' && header[1] === 'stderr'))) {
      current = header[1] as 'stdout' | 'stderr';
      continue;
    }
    if (current) sections[current].push(line);
  }
  return { stdout: sections.stdout.join('\n'), stderr: sections.stderr.join('\n') };
}
