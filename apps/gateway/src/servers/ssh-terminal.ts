import { randomBytes } from 'node:crypto';
import { SavedServerRow } from '@app/ssh';
import type { Client } from 'ssh2';
import { RemoteCommandOutcome, formatCommandOutput, runRemoteCommand } from './remote-command';
import { ServersService } from './servers.service';
import { RemoteJobHandle, RemoteJobStart, jobScript, shellQuote, startRemoteJob } from './remote-job';

/** What one terminal call on an ssh session returns (the terminal tool's result shape). */
export interface SshTerminalResult {
  output: string;
  metadata: Record<string, unknown>;
  is_error: boolean;
}

/** The sandbox terminal's wait window (TOOLS.md): default and clamp. */
const DEFAULT_WAIT_MS = 10_000;
const MIN_WAIT_MS = 250;
const MAX_WAIT_MS = 600_000;
/** Bytes of each stream read back for a result; the output budget cuts further. */
const READ_BACK_BYTES = 4 * 1024 * 1024;
/** How long the claim-and-read exec of a call turning into a job may take. */
const CLAIM_TIMEOUT_MS = 30_000;

/**
 * The terminal of an ssh-backed session, shaped like the sandbox terminal
 * (deploy/sandbox/agent/runbox_tools/terminal.py). Each call starts the command on the server
 * as a process group of its own, its output going to files in a job directory under the
 * session's directory; the call then waits for it for `max_wait_ms`. A command that ends in
 * time is returned inline (its directory removed); one still running becomes a background
 * job that the server-side launcher keeps watching after the channel is closed, recording its
 * end in status.json. The shell state that must persist (working directory, exported
 * variables) is kept on the server in `~/.runbox/sessions/<session>/`, so any gateway replica
 * serves the next call.
 */
export class SshTerminal {
  constructor(private readonly servers: ServersService) {}

  async run(tenantId: string, sessionId: string, server: SavedServerRow, args: { command: string; max_wait_ms?: number }, timeoutSeconds: number, maxOutputChars: number): Promise<SshTerminalResult> {
    const waitMs = clampWait(args.max_wait_ms);
    // As in the sandbox: the timeout applies only while the call waits; past the wait window
    // the command is a background job, which no timeout kills.
    const killAtTimeout = timeoutSeconds * 1000 <= waitMs;
    const start: RemoteJobStart = {
      sessionId,
      jobId: newJobId(),
      script: jobScript(sessionId, stripTrailingAmpersand(args.command)),
      timeoutSeconds: killAtTimeout ? timeoutSeconds : null,
      readBackBytes: READ_BACK_BYTES,
    };
    const started = Date.now();
    return this.servers.withConnection(tenantId, server, async ({ client }) => {
      const job = startRemoteJob(client, start);
      const first = await Promise.race([job.done, delay(killAtTimeout ? timeoutSeconds * 1000 + 10_000 : waitMs).then(() => null)]);
      if (first) return this.inlineResult(first, server, timeoutSeconds, maxOutputChars);
      if (killAtTimeout) {
        // The launcher's own watchdog did not answer: the connection is stuck. Hang up.
        job.abandon(true);
        return { output: 'status: timed_out\nexit_code: unknown\nnote: the server did not answer after the timeout; the channel was closed', metadata: { exit_code: null, timed_out: true, background: false, backend: 'ssh', server: server.name }, is_error: true };
      }
      // A launcher that could not start the command (its directory not writable) has ended: report that.
      const handle = await job.handle.catch(() => null);
      const claim = handle && (await claimForBackground(client, handle));
      if (!handle || !claim) return this.inlineResult(await job.done, server, timeoutSeconds, maxOutputChars);
      job.abandon(false);
      return backgroundResult(handle, start.jobId, claim, waitMs, maxOutputChars, server, Date.now() - started);
    });
  }

  private inlineResult(outcome: RemoteCommandOutcome, server: SavedServerRow, timeoutSeconds: number, maxOutputChars: number): SshTerminalResult {
    const output = formatCommandOutput(outcome, timeoutSeconds, maxOutputChars, { timeoutNote: `note: timed out after ${timeoutSeconds} seconds; the command's process group was sent SIGTERM, then SIGKILL` });
    const timedOut = outcome.status === 'timed_out';
    const metadata = { exit_code: outcome.exitCode, timed_out: timedOut, background: false, backend: 'ssh', server: server.name, duration_ms: outcome.durationMs };
    return { output, metadata, is_error: timedOut };
  }
}

/**
 * Marks the job as gone to the background, unless its launcher has already claimed it as
 * finished (both sides `mkdir` the same directory, so exactly one wins), and reads the
 * output so far. Null when the command finished first: its inline result is on its way.
 */
async function claimForBackground(client: Client, handle: RemoteJobHandle): Promise<RemoteCommandOutcome | null> {
  const dir = shellQuote(handle.dir);
  const script = `if mkdir ${dir}/.claimed 2>/dev/null; then echo background; head -c ${READ_BACK_BYTES} ${dir}/stdout.txt; head -c ${READ_BACK_BYTES} ${dir}/stderr.txt >&2; fi`;
  const read = await runRemoteCommand(client, `sh -c ${shellQuote(script)}`, CLAIM_TIMEOUT_MS);
  if (!read.stdout.startsWith('background\n')) return null;
  return { ...read, stdout: read.stdout.slice('background\n'.length) };
}

function backgroundResult(handle: RemoteJobHandle, jobId: string, soFar: RemoteCommandOutcome, waitMs: number, limit: number, server: SavedServerRow, durationMs: number): SshTerminalResult {
  const files = { status_file: `${handle.dir}/status.json`, stdout_file: `${handle.dir}/stdout.txt`, stderr_file: `${handle.dir}/stderr.txt` };
  const header = [
    'status: running',
    `note: still running after ${waitMs} ms, so it goes on as a background job (not killed). Its files keep being written; stop it with: kill -- -${handle.pid}`,
    `job_id: ${jobId}`,
    `pid: ${handle.pid}`,
    ...Object.entries(files).map(([name, path]) => `${name}: ${path}`),
  ];
  const output = formatCommandOutput(soFar, 0, limit, { header, streamSuffix: ' so far' });
  const metadata = { exit_code: null, timed_out: false, cancelled: false, background: true, job_id: jobId, pid: handle.pid, ...files, backend: 'ssh', server: server.name, duration_ms: durationMs };
  return { output, metadata, is_error: false };
}

function clampWait(value: number | undefined): number {
  return Math.min(Math.max(value ?? DEFAULT_WAIT_MS, MIN_WAIT_MS), MAX_WAIT_MS);
}

/** A trailing `&` is dropped, as in the sandbox: backgrounding is what the wait window is for. */
export function stripTrailingAmpersand(command: string): string {
  const stripped = command.trimEnd().replace(/(?<![&|>\\])&\s*$/, '').trimEnd();
  return stripped || command;
}

function newJobId(): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
