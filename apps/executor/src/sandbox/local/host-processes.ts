import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * Finds the sandbox agent's source next to this checkout or build: the same program the
 * container image runs (deploy/sandbox/agent), so both backends behave alike.
 */
export function findAgentScript(from: string = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'deploy', 'sandbox', 'agent', 'runbox_agent.py');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) throw new Error(`deploy/sandbox/agent/runbox_agent.py not found above ${from}`);
  }
}

/**
 * Kills every process whose environment carries `marker` (NAME=value), repeating until none
 * is left. The local agent and everything it starts inherit its RUNBOX_AGENT_SOCKET, so
 * this reaches background jobs too, although each sits in its own process group.
 */
export async function killProcessesMarked(marker: string, options: { prefix?: boolean } = {}): Promise<number> {
  let killed = 0;
  for (let round = 0; round < 5; round++) {
    const pids = await processesMarked(marker, options);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        killed++;
      } catch {
        // exited meanwhile
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return killed;
}

/** Pids whose environment has `marker` as a whole entry (or, with `prefix`, an entry starting with it). */
export async function processesMarked(marker: string, options: { prefix?: boolean } = {}): Promise<number[]> {
  const needle = Buffer.from(options.prefix ? `\0${marker}` : `\0${marker}\0`);
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const environ = Buffer.concat([Buffer.from([0]), await readFile(`/proc/${name}/environ`)]);
      if (environ.includes(needle)) pids.push(Number(name));
    } catch {
      // gone, or another user's process: not ours either way
    }
  }
  return pids;
}
