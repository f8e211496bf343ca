import { constants } from 'node:os';
import { ChannelOpenError } from '@app/ssh';
import type { Client, ClientChannel } from 'ssh2';

/** Bytes kept of each stream; past it the rest is counted, not kept. */
const KEEP_BYTES_PER_STREAM = 4 * 1024 * 1024;

export interface RemoteCommandOutcome {
  status: 'exited' | 'timed_out';
  /** The exit status; 128 + signal number for a command killed by a signal; null when unknown. */
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Bytes the streams had in all (kept or not). */
  stdoutBytes: number;
  stderrBytes: number;
  durationMs: number;
}

/**
 * Runs one command in its own channel of an open connection. At the timeout the channel is
 * closed (sshd then hangs up the command's session, which ends it unless it ignores SIGHUP).
 */
export function runRemoteCommand(client: Client, command: string, timeoutMs: number): Promise<RemoteCommandOutcome> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const onChannel = (err: Error | undefined, channel: ClientChannel) => {
      // The channel did not open, so the command never started: safe to try again elsewhere.
      if (err) return reject(new ChannelOpenError(err.message));
      const out = new BoundedText();
      const errOut = new BoundedText();
      let exitCode: number | null = null;
      let signal: string | null = null;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        closeChannel(channel);
      }, timeoutMs);
      channel.on('data', (chunk: Buffer) => out.add(chunk));
      channel.stderr.on('data', (chunk: Buffer) => errOut.add(chunk));
      channel.on('exit', (code: number | null, sig?: string) => {
        if (typeof code === 'number') exitCode = code;
        if (sig) {
          // ssh2 reports `SIGTERM` where RFC 4254 sends `TERM`.
          signal = sig.replace(/^SIG/, '');
          const num = (constants.signals as Record<string, number>)[`SIG${signal}`];
          exitCode = num ? 128 + num : null;
        }
      });
      channel.on('close', () => {
        clearTimeout(timer);
        resolve({
          status: timedOut ? 'timed_out' : 'exited',
          exitCode: timedOut ? null : exitCode,
          signal,
          stdout: out.text(),
          stderr: errOut.text(),
          stdoutBytes: out.total,
          stderrBytes: errOut.total,
          durationMs: Date.now() - started,
        });
      });
    };
    try {
      client.exec(command, onChannel);
    } catch (err) {
      // ssh2 throws "Not connected" when the socket is already gone.
      reject(new ChannelOpenError((err as Error).message));
    }
  });
}

function closeChannel(channel: ClientChannel): void {
  // Ask for a HUP first (OpenSSH honours signal requests since 7.9), then close the channel.
  try {
    channel.signal('HUP');
  } catch {
    // The signal request is best effort.
  }
  channel.close();
}

class BoundedText {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  total = 0;

  add(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.kept >= KEEP_BYTES_PER_STREAM) return;
    const part = chunk.subarray(0, KEEP_BYTES_PER_STREAM - this.kept);
    this.chunks.push(part);
    this.kept += part.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** What a caller may change in the layout: a background job's handle, or its own timeout note. */
export interface OutputLayout {
  /** Replaces the `status:` and `exit_code:` lines (a background job's handle). */
  header?: string[];
  /** Appended to the section names (` so far` for a job still running). */
  streamSuffix?: string;
  timeoutNote?: string;
}

/**
 * The result text in the terminal tool's layout (deploy/sandbox/agent/runbox_tools/terminal.py):
 * `status:` and `exit_code:` lines, a note on a timeout, then `stdout:` and `stderr:`
 * sections, sharing `limit` so a flood on one cannot hide the other.
 */
export function formatCommandOutput(o: RemoteCommandOutcome, timeoutSeconds: number, limit: number, layout: OutputLayout = {}): string {
  const lines = layout.header ?? [`status: ${o.status}`, `exit_code: ${o.exitCode ?? 'unknown'}`];
  if (!layout.header && o.status === 'timed_out') {
    lines.push(layout.timeoutNote ?? `note: timed out after ${timeoutSeconds} seconds; the channel was closed, which hangs up the command (one that ignores SIGHUP may keep running on the server)`);
  }
  const header = lines.join('\n');
  const budget = Math.max(limit - header.length - 120, Math.floor(limit / 2));
  const [outKeep, errKeep] = splitBudget(o.stdout.length, o.stderr.length, budget);
  const sections: string[] = [];
  for (const [name, text, keep] of [
    ['stdout', o.stdout, outKeep],
    ['stderr', o.stderr, errKeep],
  ] as const) {
    if (!text) continue;
    let body = text.slice(0, keep).replace(/\n+$/, '');
    if (text.length > keep) body += `\n… ${text.length - keep} characters cut (max_output_chars=${limit})`;
    sections.push(`${name}${layout.streamSuffix ?? ''}:\n${body}`);
  }
  return [header, ...sections].join('\n');
}

/** Each stream gets half; what one does not use goes to the other. */
function splitBudget(a: number, b: number, budget: number): [number, number] {
  const half = Math.floor(budget / 2);
  if (a <= half) return [a, Math.min(b, budget - a)];
  if (b <= half) return [Math.min(a, budget - b), b];
  return [half, budget - half];
}
