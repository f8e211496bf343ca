/**
 * CPU time per call, by process: what each process on a call's path spends on it, read from
 * the kernel's own accounting (/proc/<pid>/stat, a container's cpuacct cgroup) before and
 * after a phase of calls and divided by the calls completed. Unlike a latency, it does not
 * move with the machine's load, and its total predicts the calls per second an otherwise
 * idle host can serve: (cores × 1000) / total CPU ms per call.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s on every architecture Linux runs on. */
const TICKS_PER_SECOND = 100;

/** The name of the row for the bench's own process. */
export const BENCH_CLIENT = 'bench client';

export interface CpuSource {
  name: string;
  /** Shared with everything else on the host (dockerd, containerd): its figure is an upper bound. */
  shared?: boolean;
  /** CPU seconds used so far; undefined when it cannot be read (the row then prints as "n/a"). */
  seconds: () => number | undefined;
}

/** A process's user + system CPU seconds (all its threads, not its children). */
export function processSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces or parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Every process whose command line passes `match` (read once, when the meter is set up). */
export function findProcesses(match: (args: string[], ppid: number) => boolean): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (args.length && match(args, ppid)) found.push(Number(entry));
    } catch {
      // Gone since the directory was listed.
    }
  }
  return found;
}

/** The summed CPU seconds of several processes. */
export function processesSeconds(pids: number[]): CpuSource['seconds'] {
  return () => {
    const each = pids.map(processSeconds).filter((s): s is number => s !== undefined);
    return each.length ? each.reduce((a, b) => a + b, 0) : undefined;
  };
}

/** The summed CPU seconds of Docker containers (all their processes), from cgroup v1 or v2. */
export function containersSeconds(ids: string[]): CpuSource['seconds'] {
  return () => {
    let total = 0;
    for (const id of ids) {
      const seconds = containerSeconds(id);
      if (seconds === undefined) return undefined;
      total += seconds;
    }
    return total;
  };
}

/** A Docker container's CPU seconds (all its processes), from cgroup v1 or v2; undefined when gone. */
export function containerSeconds(id: string): number | undefined {
  try {
    return Number(readFileSync(`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`, 'utf8')) / 1e9;
  } catch {
    // cgroup v2: cpu.stat's usage_usec.
  }
  for (const path of [`/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`, `/sys/fs/cgroup/docker/${id}/cpu.stat`]) {
    try {
      const usage = /usage_usec (\d+)/.exec(readFileSync(path, 'utf8'));
      if (usage) return Number(usage[1]) / 1e6;
    } catch {
      // Try the next layout.
    }
  }
  return undefined;
}

/** The bench's own process: the client side of every call (not part of the served path). */
export function ownSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

export interface CpuPhase {
  label: string;
  calls: number;
  /** Wall seconds the phase took. */
  seconds: number;
  /** The bench's own process is the call's channel end (the floor), not just its caller. */
  clientOnPath: boolean;
  /** Seconds used per source during the phase, in source order (undefined: unreadable). */
  used: Array<number | undefined>;
}

/** Reads every source around `work`, which returns the number of calls it completed. */
export async function measureCpu(label: string, clientOnPath: boolean, sources: CpuSource[], work: () => Promise<number>): Promise<CpuPhase> {
  const before = sources.map((s) => s.seconds());
  const started = performance.now();
  const calls = await work();
  const seconds = (performance.now() - started) / 1000;
  const after = sources.map((s) => s.seconds());
  const used = sources.map((_, i) => {
    const a = after[i];
    const b = before[i];
    return a === undefined || b === undefined ? undefined : a - b;
  });
  return { label, calls, seconds, clientOnPath, used };
}

/**
 * What each source spends with no calls at all (timers, heartbeats, the rest of the host for
 * the shared daemons), over `seconds`: subtracted from the phases, at its rate per second,
 * so a slow phase (few calls on a loaded machine) does not charge that to its calls.
 */
export function measureIdleCpu(sources: CpuSource[], seconds: number): Promise<CpuPhase> {
  return measureCpu('idle', false, sources, async () => {
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return 0;
  });
}

/**
 * One column per phase, one row per source, in CPU ms per call net of the source's idle
 * rate (measured by measureIdleCpu; the shared daemons' rows are not); a total of the sources
 * that are the call's own, one with the shared daemons added, and the calls per second
 * those totals allow on this host's cores when nothing else runs.
 */
export function reportCpu(sources: CpuSource[], idle: CpuPhase, phases: CpuPhase[]): void {
  const perCall = (phase: CpuPhase, i: number) => {
    const used = phase.used[i];
    // A shared daemon's idle rate is the rest of the host's, which comes and goes: its row
    // stays the upper bound it is rather than a difference of two unrelated figures.
    const idleUsed = sources[i].name === BENCH_CLIENT || sources[i].shared ? 0 : (idle.used[i] ?? 0);
    return used === undefined ? undefined : (Math.max(0, used - (idleUsed / idle.seconds) * phase.seconds) * 1000) / phase.calls;
  };
  const fmt = (value: number | undefined) => (value === undefined ? 'n/a' : value.toFixed(3));
  const total = (phase: CpuPhase, withShared: boolean) =>
    sources.reduce((sum, s, i) => ((s.name === BENCH_CLIENT && !phase.clientOnPath) || (s.shared && !withShared) ? sum : sum + (perCall(phase, i) ?? 0)), 0);
  const rows: string[][] = sources.map((s, i) => [s.shared ? `${s.name} (shared)` : s.name, ...phases.map((p) => fmt(perCall(p, i)))]);
  const own = phases.map((p) => total(p, false));
  const all = phases.map((p) => total(p, true));
  rows.push(['total, own processes', ...own.map(fmt)]);
  rows.push(['total with shared daemons', ...all.map(fmt)]);
  const cores = cpus().length;
  rows.push([`→ calls/s on ${cores} idle cores`, ...all.map((t) => (t > 0 ? ((cores * 1000) / t).toFixed(0) : 'n/a'))]);
  const idleRates = sources.filter((s) => !s.shared && s.name !== BENCH_CLIENT).map((s) => `${s.name} ${(((idle.used[sources.indexOf(s)] ?? 0) / idle.seconds) * 1000).toFixed(0)}`);
  const header = ['CPU ms per call', ...phases.map((p) => p.label)];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}`);
  console.log(`(calls: ${phases.map((p) => `${p.label} ${p.calls}`).join(', ')}; the bench client counts in a total only where it is the`);
  console.log(' channel end (the floor), not where it is the HTTP caller; the');
  console.log(' shared daemons serve the whole host, so their rows hold whatever else ran meanwhile. The');
  console.log(` others are net of what each spends idle, in ms per second: ${idleRates.join(', ')})`);
}
