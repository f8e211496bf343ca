import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { AgentChannel } from './agent-channel';
import { DockerSandboxDriver, workspaceVolumeOf } from './docker-sandbox.driver';
import { LABEL } from './sandbox-labels';
import { WarmPoolDemand, WarmPoolSizing } from './warm-pool-demand';

export interface PooledSandbox {
  name: string;
  containerId: string;
  volume: string;
  /** Attached while the container waited, so handing it out costs no exec at all. */
  channel: AgentChannel;
}

const RETRY_AFTER_FAILURE_MS = 5_000;
const REFILL_DELAY_MS = 250;

export interface SandboxPoolOptions {
  attachTimeoutMs?: number;
  /** Containers made at once while the pool is short of its target. */
  parallel?: number;
  now?: () => number;
}

/**
 * Warm containers, started and attached ahead of demand, handed to sessions on their first
 * call. They are made exactly like any sandbox (same driver, same hardening) and carry the
 * label `runbox.pool=true`. Docker labels cannot change later, so a pooled container keeps
 * that label (and gets no session label) after it is handed out: its binding to a session
 * and tenant lives in the `sandboxes` row and in this process. The pool therefore keeps
 * track of every container it made until it is destroyed, so the orphan sweep can tell a
 * handed-out pool container from a leftover of an earlier process.
 *
 * Its size follows demand (WarmPoolDemand): it grows while new sessions come faster than
 * it refills and halves back toward its minimum after an idle window, checked by one timer
 * for the whole pool. It never holds more than the executor has room for (`start(room)`:
 * its capacity less the sandboxes it holds), so a full or draining executor keeps none.
 * Refilling starts a moment after a hand-out and makes a few containers at a time, so a
 * burst of new sessions on a small host is not slowed further by a burst of pool creations.
 */
export class SandboxPool {
  private readonly idle: PooledSandbox[] = [];
  private readonly creating = new Map<string, Promise<void>>();
  /** Handed to a session, not destroyed yet, by container id. */
  private readonly handedOut = new Map<string, PooledSandbox>();
  /** Trimmed off, waiting for their turn to be removed: still the pool's until gone. */
  private readonly leaving = new Set<PooledSandbox>();
  private removals: Promise<void> = Promise.resolve();
  private readonly demand: WarmPoolDemand;
  /** Sandboxes the executor may still take on; the pool keeps no more than this. */
  private room: () => number = () => Number.MAX_SAFE_INTEGER;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;
  private refillTimer?: NodeJS.Timeout;
  private trimTimer?: NodeJS.Timeout;
  private readonly attachTimeoutMs: number;
  private readonly parallel: number;
  private readonly now: () => number;

  constructor(
    readonly sizing: WarmPoolSizing,
    private readonly driver: DockerSandboxDriver,
    private readonly logger: Logger,
    options: SandboxPoolOptions = {},
  ) {
    this.attachTimeoutMs = options.attachTimeoutMs ?? 15_000;
    this.parallel = Math.max(1, options.parallel ?? 2);
    this.now = options.now ?? Date.now;
    this.demand = new WarmPoolDemand(sizing, this.now());
  }

  /** Containers ready to hand out right now. */
  get ready(): number {
    return this.idle.length;
  }

  /** How many it aims to hold now: its demand-driven target, within the executor's room. */
  get target(): number {
    return Math.max(0, Math.min(this.demand.target, this.room()));
  }

  /** Fills the pool and starts the one timer that shrinks it when idle. */
  start(room: () => number): void {
    this.room = room;
    if (this.sizing.max > 0 && !this.trimTimer && !this.closed) {
      this.trimTimer = setInterval(() => this.trim(), trimIntervalFor(this.sizing.idleMs));
      this.trimTimer.unref();
    }
    this.refill();
  }

  /**
   * Lowers the target after an idle window and removes the containers above it (also when
   * the executor's room shrank: a full executor takes no new session to give them to).
   */
  trim(): void {
    if (this.closed) return;
    this.demand.shrinkIfIdle(this.now());
    const excess = this.idle.length - this.target;
    // The longest-waiting first: the newest are the warmest in the engine's caches.
    const surplus = this.idle.splice(0, Math.max(0, excess));
    if (surplus.length > 0) this.removeInTurn(surplus, 'the warm pool shrank');
  }

  /**
   * Removes containers one after another rather than all at once. Halving a pool of 32
   * asked the engine for 16 container and workspace-disk removals together, and on two
   * cores the live sessions' tool calls stalled for a few hundred milliseconds meanwhile
   * (the load bench's fixed rate, N = 50). One at a time the pool's shrinking costs the
   * same but never takes both cores. Until removed they are listed as the pool's, so the
   * orphan sweep leaves them to it.
   */
  private removeInTurn(sandboxes: PooledSandbox[], why: string): void {
    for (const sandbox of sandboxes) this.leaving.add(sandbox);
    this.removals = this.removals.then(async () => {
      for (const sandbox of sandboxes) {
        await this.discard(sandbox, why);
        this.leaving.delete(sandbox);
      }
    });
  }

  /** A ready container, or undefined when none is; either way the pool refills behind. */
  take(): PooledSandbox | undefined {
    let taken: PooledSandbox | undefined;
    while (!taken && this.idle.length > 0) {
      const candidate = this.idle.shift()!;
      if (candidate.channel.isOpen) taken = candidate;
      else void this.discard(candidate, 'its channel closed while it waited');
    }
    if (taken) this.handedOut.set(taken.containerId, taken);
    this.demand.handedOut(this.idle.length, this.now());
    // Not at once: on a small host a container start competes for the CPU with the
    // session's first command, which is what the pool exists to make fast.
    this.refillSoon();
    return taken;
  }

  /** Takes back a container handed out for a session that turned out to need another one. */
  giveBack(containerId: string): void {
    const sandbox = this.handedOut.get(containerId);
    if (!sandbox) return;
    this.handedOut.delete(containerId);
    if (this.closed || !sandbox.channel.isOpen) void this.discard(sandbox, 'not needed');
    else this.idle.unshift(sandbox);
  }

  /** Called when a sandbox is destroyed: whatever it was, the pool no longer answers for it. */
  forget(containerId: string): void {
    this.handedOut.delete(containerId);
  }

  /** Names, ids and volumes of every container the pool made and nobody destroyed yet. */
  owned(): { containers: Set<string>; volumes: Set<string> } {
    const containers = new Set<string>();
    const volumes = new Set<string>();
    for (const s of [...this.idle, ...this.leaving]) {
      containers.add(s.containerId).add(s.name);
      volumes.add(s.volume);
    }
    for (const name of this.creating.keys()) {
      containers.add(name);
      volumes.add(workspaceVolumeOf(name));
    }
    for (const s of this.handedOut.values()) {
      containers.add(s.containerId);
      volumes.add(s.volume);
    }
    return { containers, volumes };
  }

  private refillSoon(): void {
    if (this.refillTimer || this.closed) return;
    this.refillTimer = setTimeout(() => {
      this.refillTimer = undefined;
      this.refill();
    }, REFILL_DELAY_MS);
    this.refillTimer.unref();
  }

  refill(): void {
    if (this.closed || this.retryTimer) return;
    const wanted = this.target;
    while (this.creating.size < this.parallel && this.idle.length + this.creating.size < wanted) {
      const name = `runbox-pool-${randomBytes(6).toString('hex')}`;
      this.creating.set(name, this.createOne(name));
    }
  }

  /**
   * Stops refilling and removes the containers still waiting (they hold nothing of
   * anyone's), including one being made right now.
   */
  async drain(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.refillTimer);
    clearInterval(this.trimTimer);
    const waiting = this.idle.splice(0);
    await Promise.all([...waiting.map((s) => this.discard(s, 'the executor is stopping')), ...this.creating.values(), this.removals]);
  }

  private async createOne(name: string): Promise<void> {
    let created: { containerId: string; volume: string } | undefined;
    try {
      created = await this.driver.create(name, { [LABEL.pool]: 'true' });
      const channel = await this.driver.attach(created.containerId);
      await channel.ready(this.attachTimeoutMs);
      // One no-op command warms the agent's terminal path (runner script, state file, job
      // folder), so a session's first command costs what every later one does. The state
      // it leaves is the same a fresh container's first command would leave.
      const warmUp = await channel.call('terminal', { command: 'true', max_output_chars: 1_000 }, this.attachTimeoutMs);
      if (warmUp.is_error) throw new Error(`warm-up command failed: ${warmUp.output}`);
      const sandbox = { name, ...created, channel };
      // Registered before `creating` forgets the name, so the sweep always knows it.
      if (this.closed) await this.discard(sandbox, 'the executor is stopping');
      else this.idle.push(sandbox);
    } catch (err) {
      this.logger.error({ err, container: name }, 'warm pool: could not start a container; retrying shortly');
      if (created) await this.driver.remove(created).catch(() => undefined);
      if (!this.closed) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.refill();
        }, RETRY_AFTER_FAILURE_MS);
        this.retryTimer.unref();
      }
    } finally {
      this.creating.delete(name);
    }
    this.refill();
  }

  private async discard(sandbox: PooledSandbox, why: string): Promise<void> {
    sandbox.channel.close(why);
    try {
      await this.driver.remove(sandbox);
    } catch (err) {
      this.logger.warn({ err, container: sandbox.name }, 'warm pool: removing a container failed; the sweep will retry');
    }
  }
}

/** How often the pool checks whether it should shrink: a quarter of the idle window, 250 ms to 15 s. */
function trimIntervalFor(idleMs: number): number {
  return Math.min(15_000, Math.max(250, Math.floor(idleMs / 4)));
}
