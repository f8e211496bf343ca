import { SavedServerRow } from '@app/ssh';
import { formatCommandOutput, runRemoteCommand } from './remote-command';
import { ServersService } from './servers.service';

/** What one terminal call on an ssh session returns (the terminal tool's result shape). */
export interface SshTerminalResult {
  output: string;
  metadata: Record<string, unknown>;
  is_error: boolean;
}

/**
 * The terminal of an ssh-backed session. Each call is one channel running bash; the shell
 * state that must persist (working directory, exported variables) is kept on the server in
 * `~/.runbox/sessions/<session>/` and restored before the command, saved after it, so it
 * survives reconnects and any gateway replica serves the next call. The command runs in
 * that same shell, so `cd` and `export` take effect.
 */
export class SshTerminal {
  constructor(private readonly servers: ServersService) {}

  async run(tenantId: string, sessionId: string, server: SavedServerRow, command: string, timeoutSeconds: number, maxOutputChars: number): Promise<SshTerminalResult> {
    const script = wrap(sessionId, command);
    const outcome = await this.servers.withConnection(tenantId, server, ({ client }) => runRemoteCommand(client, `bash -c ${shellQuote(script)}`, timeoutSeconds * 1000));
    const output = formatCommandOutput(outcome, timeoutSeconds, maxOutputChars);
    const metadata = { exit_code: outcome.exitCode, timed_out: outcome.status === 'timed_out', background: false, backend: 'ssh', server: server.name, duration_ms: outcome.durationMs };
    return { output, metadata, is_error: outcome.status === 'timed_out' };
  }
}

/**
 * Restores the session's state, runs the command in the same shell, saves the state again.
 * The session's directory starts as ~/runbox/<session> (made on first use). The state is
 * saved on the shell's exit, an `exit` in the command included; a command killed by a
 * signal saves nothing.
 */
function wrap(sessionId: string, command: string): string {
  const state = `"$HOME/.runbox/sessions/${sessionId}"`;
  return [
    `__runbox_state=${state}`,
    'mkdir -p "$__runbox_state" || exit 125',
    `if [ -f "$__runbox_state/env" ]; then . "$__runbox_state/env" 2>/dev/null; fi`,
    `if [ -f "$__runbox_state/cwd" ]; then cd "$(cat "$__runbox_state/cwd")" 2>/dev/null || cd; else mkdir -p "$HOME/runbox/${sessionId}" && cd "$HOME/runbox/${sessionId}"; fi`,
    '__runbox_save() { __runbox_rc=$?; pwd > "$__runbox_state/cwd"; export -p > "$__runbox_state/env"; return $__runbox_rc; }',
    'trap __runbox_save EXIT',
    command,
  ].join('\n');
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
