import Docker from 'dockerode';
import { PassThrough, Readable, Writable } from 'node:stream';
import { AGENT_COMMAND, SANDBOX_USER } from '../sandbox/sandbox-policy';

/** The most of the helper's stderr kept (its JSON lines are short). */
const STDERR_LIMIT = 8192;

/** The sandbox side refused or failed a transfer; `message` comes from its containment rules. */
export class WorkspaceTransferError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface WorkspaceReader {
  /** The file's size and its path as the workspace shows it, announced before the bytes. */
  size: number;
  path: string;
  bytes: Readable;
  /** Resolves when the helper finished; rejects with its error. */
  finished: Promise<void>;
  abort(): void;
}

export interface WorkspaceWriter {
  bytes: Writable;
  /** The helper's report once it renamed the file into place. */
  finished: Promise<{ size: number; sha256: string; path: string }>;
  /** Stops the transfer: the helper sees a short stream and leaves no file. */
  abort(): void;
}

/**
 * A file's bytes in and out of a session's container, through one `docker exec` of the
 * agent's transfer helper per transfer (runbox_tools/transfer.py), as the sandbox user: the
 * helper resolves the path with the same containment rules as the file tools, and a write
 * lands only when complete. The bytes stream; nothing is buffered whole.
 */
export class WorkspaceStreams {
  constructor(private readonly docker: Docker) {}

  async openRead(containerId: string, path: string, maxBytes: number): Promise<WorkspaceReader> {
    const { stream, stdout, stderr } = await this.exec(containerId, ['transfer-read', path, String(maxBytes)], false);
    const lines = new LineReader(stderr);
    const first = await lines.next();
    const header = parseLine(first);
    if (!header || typeof header.size !== 'number') {
      stream.destroy();
      throw helperError(header, first);
    }
    const finished = lines.rest().then((text) => {
      const err = parseLine(text.trim().split('\n').pop() ?? '');
      if (err?.error) throw helperError(err, text);
    });
    finished.catch(() => undefined);
    return { size: header.size, path: String(header.path ?? path), bytes: stdout, finished, abort: () => stream.destroy() };
  }

  /**
   * Resolves once the helper accepted the path (inside the workspace, its temp file made),
   * and rejects with its refusal otherwise: no byte is sent before, so a refusal is never
   * hidden behind the broken pipe that streaming into a helper that already exited makes.
   */
  async openWrite(containerId: string, path: string, size: number): Promise<WorkspaceWriter> {
    const { stream, stdout, stderr } = await this.exec(containerId, ['transfer-write', path, String(size)], true);
    const out = collect(stdout);
    const lines = new LineReader(stderr);
    const first = await lines.next();
    const accepted = parseLine(first);
    if (!accepted || typeof accepted.path !== 'string') {
      stream.destroy();
      throw helperError(accepted, first);
    }
    const finished = Promise.all([out, lines.rest()]).then(([text, errText]) => {
      const report = parseLine(text.trim());
      if (report && typeof report.sha256 === 'string' && typeof report.size === 'number') {
        return { size: report.size, sha256: report.sha256, path: String(report.path ?? path) };
      }
      throw helperError(parseLine(errText.trim().split('\n').pop() ?? ''), errText);
    });
    finished.catch(() => undefined);
    // Writes go to the exec's stdin; end() half-closes it, which the helper reads as EOF.
    return { bytes: stream, finished, abort: () => stream.destroy() };
  }

  private async exec(containerId: string, args: string[], stdin: boolean) {
    const exec = await this.docker.getContainer(containerId).exec({
      Cmd: [...AGENT_COMMAND, ...args],
      User: SANDBOX_USER,
      AttachStdin: stdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    const stream = await exec.start({ hijack: true, stdin });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    this.docker.modem.demuxStream(stream, stdout, stderr);
    const end = () => {
      stdout.end();
      stderr.end();
    };
    stream.on('end', end);
    stream.on('close', end);
    stream.on('error', end);
    return { stream, stdout, stderr };
  }
}

type HelperLine = { size?: unknown; path?: unknown; sha256?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;

function parseLine(line: string): HelperLine {
  try {
    const v: unknown = JSON.parse(line);
    return v && typeof v === 'object' ? (v as HelperLine) : undefined;
  } catch {
    return undefined;
  }
}

function helperError(line: HelperLine, raw: string): WorkspaceTransferError {
  if (line?.error && typeof line.error.message === 'string') return new WorkspaceTransferError(String(line.error.code ?? 'transfer_failed'), line.error.message);
  return new WorkspaceTransferError('transfer_failed', `the sandbox's transfer helper failed${raw.trim() ? `: ${raw.trim().slice(0, 500)}` : ' (the container stopped?)'}`);
}

/** Reads a stream's text, keeping at most STDERR_LIMIT characters. */
function collect(stream: Readable): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    stream.on('data', (d: Buffer) => {
      if (text.length < STDERR_LIMIT) text += d.toString('utf8').slice(0, STDERR_LIMIT - text.length);
    });
    stream.on('end', () => resolve(text));
    stream.on('close', () => resolve(text));
  });
}

/** The first line of a stream, then the rest of it (bounded). */
class LineReader {
  private buffer = '';
  private ended = false;
  private waiting?: () => void;

  constructor(private readonly stream: Readable) {
    stream.on('data', (d: Buffer) => {
      if (this.buffer.length < STDERR_LIMIT) this.buffer += d.toString('utf8');
      this.waiting?.();
    });
    const end = () => {
      this.ended = true;
      this.waiting?.();
    };
    stream.on('end', end);
    stream.on('close', end);
  }

  async next(): Promise<string> {
    while (!this.buffer.includes('\n') && !this.ended && this.buffer.length < STDERR_LIMIT) {
      await new Promise<void>((r) => (this.waiting = r));
    }
    const i = this.buffer.indexOf('\n');
    const line = i < 0 ? this.buffer : this.buffer.slice(0, i);
    this.buffer = i < 0 ? '' : this.buffer.slice(i + 1);
    return line;
  }

  async rest(): Promise<string> {
    while (!this.ended) await new Promise<void>((r) => (this.waiting = r));
    return this.buffer;
  }
}
