/**
 * The agent's `terminal` with and without its spare shell: `./runbox bench terminal-shell`.
 * Prints figures; asserts nothing.
 *
 * Runs bench/support/terminal_shell.py in a sandbox container made as the executor makes
 * them (tool user, read-only root, no capabilities, no network): `terminal true` started in
 * the spare shell, against the baseline of a shell started for the call, alternated call by
 * call in one process. The container is removed at the end (`--rm`).
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 300);

function main(): void {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(ROOT, 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const load = loadavg().map((l) => l.toFixed(1)).join(' ');
  console.log(`runbox terminal-shell bench (image ${image}; ${new Date().toISOString()}; ${cpus().length} CPUs, load average ${load})\n`);
  const output = execFileSync(
    'docker',
    [
      'run', '--rm', '--user', '1000:1000', '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--network', 'none',
      '--tmpfs', '/tmp:rw,exec,size=64m', '--tmpfs', '/workspace:rw,exec,uid=1000,gid=1000',
      '-v', `${join(ROOT, 'bench/support/terminal_shell.py')}:/opt/bench/terminal_shell.py:ro`,
      image, 'python3', '/opt/bench/terminal_shell.py', String(SAMPLES),
    ],
    { encoding: 'utf8' },
  );
  console.log(output.trimEnd());
}

main();
