import { ChannelOpenError } from '@app/ssh';
import type { Client, ClientChannel } from 'ssh2';
import { RemoteCommandOutcome } from './remote-command';

/** Where a started job lives on the server: its process group and its directory. */
export interface RemoteJobHandle {
  pid: number;
  dir: string;
}

export interface RemoteJobStart {
  sessionId: string;
  jobId: string;
  /** The bash script the job runs (see jobScript); sent over the channel's stdin. */
  script: string;
  /** Kill the group at this many seconds; null for a call that may become a background job. */
  timeoutSeconds: number | null;
  readBackBytes: number;
}

export interface RemoteJob {
  /** Resolves once the launcher has started the command. */
  handle: Promise<RemoteJobHandle>;
  /** Resolves when the launcher has reported the end (inline) or the channel closed. */
  done: Promise<RemoteCommandOutcome>;
  /** Closes the channel; the launcher keeps watching the job unless `hangUp` asks it to stop. */
  abandon(hangUp: boolean): void;
}

/** Bytes of the launcher's control lines kept; a line longer than this is not one of ours. */
const MAX_CONTROL_BYTES = 8 * 1024;
/** Seconds between SIGTERM and SIGKILL when the timeout stops a group (as in the sandbox). */
const KILL_GRACE_SECONDS = 2;

/**
 * Starts a command on the server through a launcher (bash, run in the channel) that:
 * makes the job directory `~/runbox/<session>/.runbox/jobs/<job>/`, writes the script from
 * stdin to command.sh and status.json, starts the command as a process group of its own
 * (`set -m`, so `kill -- -<pid>` reaches every child) with stdin from /dev/null and its
 * streams going to stdout.txt and stderr.txt, and prints `start <pid> <dir>`. It ignores
 * SIGHUP and SIGPIPE, so closing the channel leaves it watching. When the command ends, the
 * launcher claims the job by making `.claimed` (the gateway does the same when it turns the
 * call into a background job; `mkdir` lets exactly one of them win): if it wins, it adopts
 * the saved shell state, prints `end <exit code | timeout>` and the output, and removes the
 * directory; if it loses, it records the end in status.json.
 */
export function startRemoteJob(client: Client, start: RemoteJobStart): RemoteJob {
  let channel: ClientChannel | undefined;
  let resolveHandle!: (handle: RemoteJobHandle) => void;
  let rejectHandle!: (err: Error) => void;
  const handle = new Promise<RemoteJobHandle>((resolve, reject) => {
    resolveHandle = resolve;
    rejectHandle = reject;
  });
  handle.catch(() => undefined);
  const began = Date.now();
  const done = new Promise<RemoteCommandOutcome>((resolve, reject) => {
    const onChannel = (err: Error | undefined, opened: ClientChannel) => {
      if (err) {
        rejectHandle(new ChannelOpenError(err.message));
        return reject(new ChannelOpenError(err.message));
      }
      channel = opened;
      const stdout = new LauncherOutput(start.readBackBytes);
      const stderr: Buffer[] = [];
      let stderrBytes = 0;
      let exitCode: number | null = null;
      opened.on('data', (chunk: Buffer) => {
        stdout.add(chunk);
        const started = stdout.started();
        if (started) resolveHandle(started);
      });
      opened.stderr.on('data', (chunk: Buffer) => {
        if (stderrBytes < start.readBackBytes) stderr.push(chunk.subarray(0, start.readBackBytes - stderrBytes));
        stderrBytes += chunk.length;
      });
      opened.on('exit', (code: number | null) => {
        if (typeof code === 'number') exitCode = code;
      });
      opened.on('close', () => {
        rejectHandle(new Error('the launcher ended before starting the command'));
        const end = stdout.end();
        const errText = Buffer.concat(stderr).toString('utf8');
        resolve({
          status: end === 'timeout' ? 'timed_out' : 'exited',
          exitCode: end === 'timeout' ? null : (end ?? exitCode),
          signal: null,
          stdout: stdout.body(),
          stderr: errText,
          stdoutBytes: stdout.bodyBytes(),
          stderrBytes,
          durationMs: Date.now() - began,
        });
      });
      opened.end(start.script);
    };
    try {
      client.exec(`bash -c ${shellQuote(launcher(start))}`, onChannel);
    } catch (err) {
      rejectHandle(new ChannelOpenError((err as Error).message));
      reject(new ChannelOpenError((err as Error).message));
    }
  });
  const abandon = (hangUp: boolean) => {
    if (!channel) return;
    if (hangUp) {
      try {
        channel.signal('HUP');
      } catch {
        // The signal request is best effort.
      }
    }
    channel.close();
  };
  return { handle, done, abandon };
}

function launcher(start: RemoteJobStart): string {
  const dir = `"$HOME/runbox/${start.sessionId}/.runbox/jobs/${start.jobId}"`;
  const state = `"$HOME/.runbox/sessions/${start.sessionId}"`;
  const watchdog =
    start.timeoutSeconds === null
      ? ['w=']
      : [
          // Output to /dev/null: sshd keeps the channel open while anything holds its pipes.
          `( trap 'kill "$s" 2>/dev/null; exit 0' TERM; sleep ${start.timeoutSeconds} & s=$!; wait "$s"; : >"$dir/timed_out"; kill -TERM -- -"$pid"; sleep ${KILL_GRACE_SECONDS}; kill -KILL -- -"$pid" ) </dev/null >/dev/null 2>&1 &`,
          'w=$!',
        ];
  return [
    "trap '' HUP PIPE",
    `dir=${dir} state=${state} job=${start.jobId}`,
    'mkdir -p "$dir" "$state" || exit 125',
    'cat >"$dir/command.sh" || exit 125',
    'now() { date -u +%Y-%m-%dT%H:%M:%SZ; }',
    // Written to a temporary name and renamed, so a reader never sees half of it.
    `status() { printf '{"job_id": "%s", "pid": %s, "status": "%s", "exit_code": %s, "started_at": "%s", "finished_at": %s}\\n' "$job" "$pid" "$1" "$2" "$started" "$3" >"$dir/.status.tmp" && mv -f "$dir/.status.tmp" "$dir/status.json"; }`,
    'started=$(now)',
    'set -m',
    'bash "$dir/command.sh" "$dir" </dev/null >"$dir/stdout.txt" 2>"$dir/stderr.txt" &',
    'pid=$!',
    'set +m',
    'status running null null',
    `printf 'start %s %s\\n' "$pid" "$dir"`,
    ...watchdog,
    'wait "$pid" 2>/dev/null; rc=$?',
    'if [ -n "$w" ] && [ ! -e "$dir/timed_out" ]; then kill "$w" 2>/dev/null; fi',
    'if mkdir "$dir/.claimed" 2>/dev/null; then',
    '  end=$rc',
    '  if [ -e "$dir/timed_out" ]; then end=timeout',
    '  elif [ -f "$dir/state.cwd" ] && [ -f "$dir/state.env" ]; then mv -f "$dir/state.env" "$state/env"; mv -f "$dir/state.cwd" "$state/cwd"; fi',
    `  printf 'end %s\\n' "$end"`,
    `  head -c ${start.readBackBytes} "$dir/stdout.txt"`,
    `  head -c ${start.readBackBytes} "$dir/stderr.txt" >&2`,
    '  rm -rf "$dir"',
    'else',
    // A job's shell state is not adopted: later calls have moved the session on since.
    '  rm -f "$dir/state.cwd" "$dir/state.env"',
    '  status exited "$rc" "\\"$(now)\\""',
    'fi',
  ].join('\n');
}

/**
 * The script a job runs: restores the session's state, runs the command in the same shell,
 * and on the shell's exit (an `exit` in the command included) saves the state into the job
 * directory, from where the launcher adopts it for a call that ended inline. A new session
 * starts in `~/runbox/<session>`.
 */
export function jobScript(sessionId: string, command: string): string {
  const state = `"$HOME/.runbox/sessions/${sessionId}"`;
  return [
    '__runbox_job=$1; shift',
    `__runbox_state=${state}`,
    `if [ -f "$__runbox_state/env" ]; then . "$__runbox_state/env" 2>/dev/null; fi`,
    `if [ -f "$__runbox_state/cwd" ]; then cd "$(cat "$__runbox_state/cwd")" 2>/dev/null || cd; else cd "$HOME/runbox/${sessionId}"; fi`,
    '__runbox_save() { __runbox_rc=$?; pwd > "$__runbox_job/state.cwd"; export -p > "$__runbox_job/state.env"; return $__runbox_rc; }',
    'trap __runbox_save EXIT',
    command,
  ].join('\n');
}

/** The launcher's stdout: a `start` line, then an `end` line, then the command's stdout. */
class LauncherOutput {
  private head = Buffer.alloc(0);
  private readonly rest: Buffer[] = [];
  private restKept = 0;
  private restTotal = 0;
  private lines: string[] = [];

  constructor(private readonly keepBytes: number) {}

  add(chunk: Buffer): void {
    if (this.lines.length >= 2) return this.addBody(chunk);
    this.head = Buffer.concat([this.head, chunk]);
    let newline = this.head.indexOf(10);
    while (newline >= 0 && this.lines.length < 2) {
      this.lines.push(this.head.subarray(0, newline).toString('utf8'));
      this.head = this.head.subarray(newline + 1);
      newline = this.head.indexOf(10);
    }
    if (this.lines.length >= 2) {
      const leftover = this.head;
      this.head = Buffer.alloc(0);
      if (leftover.length) this.addBody(leftover);
    } else if (this.head.length > MAX_CONTROL_BYTES) {
      this.head = this.head.subarray(0, MAX_CONTROL_BYTES);
    }
  }

  started(): RemoteJobHandle | null {
    const match = /^start (\d+) (\/.*)$/.exec(this.lines[0] ?? '');
    return match ? { pid: Number(match[1]), dir: match[2] } : null;
  }

  /** The exit code, `timeout`, or null when the launcher never reported an end. */
  end(): number | 'timeout' | null {
    const match = /^end (\d+|timeout)$/.exec(this.lines[1] ?? '');
    if (!match) return null;
    return match[1] === 'timeout' ? 'timeout' : Number(match[1]);
  }

  body(): string {
    return Buffer.concat(this.rest).toString('utf8');
  }

  bodyBytes(): number {
    return this.restTotal;
  }

  private addBody(chunk: Buffer): void {
    this.restTotal += chunk.length;
    if (this.restKept >= this.keepBytes) return;
    const part = chunk.subarray(0, this.keepBytes - this.restKept);
    this.rest.push(part);
    this.restKept += part.length;
  }
}

export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
