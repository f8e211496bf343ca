import { ToolResult } from '@app/contracts';
import { isDatabaseUnavailable } from '@app/persistence';
import type { Logger } from 'pino';
import { AgentChannel } from './agent-channel';
import { KeyedLock } from './keyed-lock';
import { SandboxQuotaError } from './sandbox-quota';
import { SandboxRecord, SandboxRepository } from './sandbox.repository';
import { ProvisionedSandbox, SandboxBackend, SandboxRef, SandboxRuntime, WantedResources } from './sandbox-runtime';

export class SessionNotFoundError extends Error {
  constructor(sessionId: string) {
    super(`session ${sessionId} not found`);
  }
}

export class SandboxUnavailableError extends Error {}

/**
 * A running container whose agent has not yet taken a channel from this executor did not
 * answer the attach in time: on a busy host its agent may still be starting. A call that
 * gives its sandbox a start wait is told "not ready yet, nothing ran" and tries again; any
 * other caller gets the failure as before.
 */
export class AgentNotUpError extends SandboxUnavailableError {}

/** The call was cancelled before it reached the sandbox; nothing ran. */
export class CallCancelledError extends Error {
  constructor(callId: string) {
    super(`call ${callId} was cancelled before it started; nothing ran`);
  }
}

/** The session has no sandbox on this executor, so nothing an earlier call started there runs. */
export class NoSandboxHeldError extends Error {
  constructor(sessionId: string) {
    super(`session ${sessionId} has no sandbox on this executor any more (deleted, reaped when idle, or the session is gone)`);
  }
}

/**
 * The session's sandbox was not ready within the time its caller gives a start: the call is
 * answered with nothing run, before the caller stops waiting, so its outcome is known. The
 * sandbox goes on starting, and the next call finds it ready.
 */
export class SandboxStartingError extends Error {
  constructor(sessionId: string, waitedMs: number) {
    super(
      `the sandbox of session ${sessionId} was not ready within ${Math.round(waitedMs / 1000)} s (the host is busy starting sandboxes); ` +
        'nothing ran; it goes on starting, so try again shortly',
    );
  }
}

/** How a call waits: its id (to cancel it), and how long it may wait for the sandbox to start. */
export interface CallOptions {
  callId?: string;
  /** Unset: as long as the start takes. The tool's own limit counts from when the sandbox is ready. */
  startWithinMs?: number;
}

/** The call asked for a backend this executor does not run. */
export class BackendDisabledError extends Error {}

/** The session's sandbox already lives on another backend. */
export class BackendMismatchError extends Error {}

/**
 * This executor takes no new session: it is full, draining or decommissioned. Nothing ran;
 * the gateway places the session on another executor.
 */
export class NewSessionRefusedError extends Error {
  constructor(
    readonly reason: 'executor_full' | 'executor_draining',
    message: string,
  ) {
    super(message);
  }
}

export interface SandboxLifecyclePolicy {
  /** A sandbox with no call for this long is stopped and removed. */
  idleTtlMs: number;
  /** Keep the workspace volume of an idle-reaped sandbox for its next container. */
  keepWorkspaceOnIdle: boolean;
}

export interface CallTarget {
  tenantId: string;
  sessionId: string;
  backend: SandboxBackend;
}

/**
 * What can go wrong with a sandbox's channel: the agent broke the protocol (the sandbox is
 * stopped), the channel had to be opened again, the sandbox died under a call, or it died
 * while idle and a new one was started on its workspace.
 */
export type ChannelErrorKind = 'protocol_violation' | 'reconnect' | 'sandbox_died' | 'sandbox_restarted';

/** A session's sandbox as this executor holds it. */
interface LiveSandbox {
  tenantId: string;
  sessionId: string;
  backend: SandboxBackend;
  ref: SandboxRef;
  /**
   * The last channel its agent took from this process, kept when it closes: a container
   * without one has never answered here, and its agent may still be starting.
   */
  channel?: AgentChannel;
  connecting?: Promise<AgentChannel>;
  /** When this process took it on; the sweep leaves younger ones alone. */
  since: number;
  lastUsed: number;
  inFlight: number;
}

const ATTACH_TIMEOUT_MS = 15_000;
/** How long a cancel waits for a call that has not arrived yet (one made while its sandbox starts). */
const EARLY_CANCEL_TTL_MS = 10 * 60_000;

/**
 * Owns the sandboxes of this executor, whatever runtime they use: finds or makes a
 * session's sandbox on first use (from the warm pool when there is one), keeps one open
 * channel into each, re-adopts them after a restart, reaps idle ones, and removes what no
 * live session owns. Lifecycle steps of one session run one at a time (KeyedLock); tool
 * calls on a ready sandbox take no lock at all.
 */
export class SandboxService {
  private readonly live = new Map<string, LiveSandbox>();
  private readonly lifecycle = new KeyedLock();
  /** Channel trouble since the process started, by kind, for the executor's metrics. */
  readonly channelErrors: Record<ChannelErrorKind, number> = { protocol_violation: 0, reconnect: 0, sandbox_died: 0, sandbox_restarted: 0 };
  /** Cancels of calls not yet sent to their sandbox, by tenant and call id, with when they came. */
  private readonly earlyCancels = new Map<string, number>();
  /** Set once it stops taking new sessions (SIGTERM, decommission); never cleared in this process. */
  private refusing?: 'draining' | 'decommissioned';
  /** New sessions whose sandbox is being made, counted against the capacity. */
  private admitting = 0;

  constructor(
    readonly executorId: string,
    private readonly runtimes: ReadonlyMap<SandboxBackend, SandboxRuntime>,
    private readonly repo: SandboxRepository,
    private readonly policy: SandboxLifecyclePolicy,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
    /** Sandboxes held at most; a new session beyond it is refused (RUNBOX_EXECUTOR_MAX_SANDBOXES). */
    readonly capacity = Number.MAX_SAFE_INTEGER,
  ) {}

  get size(): number {
    return this.live.size;
  }

  /** Live sandboxes by what they are doing now: running a call (busy) or waiting for one (idle). */
  countByState(): Record<'busy' | 'idle', number> {
    let busy = 0;
    for (const sandbox of this.live.values()) if (sandbox.inFlight > 0) busy++;
    return { busy, idle: this.live.size - busy };
  }

  /** Sandboxes held or being made for new sessions: what counts against the capacity. */
  get occupied(): number {
    return this.live.size + this.admitting;
  }

  /** `ready`, or why it takes no new session. */
  get admission(): 'ready' | 'draining' | 'decommissioned' {
    return this.refusing ?? 'ready';
  }

  /** Stops taking new sessions; those it holds are served as before. A decommission is not undone by a drain. */
  stopAdmitting(why: 'draining' | 'decommissioned'): void {
    if (this.refusing !== 'decommissioned') this.refusing = why;
  }

  supports(backend: SandboxBackend): boolean {
    return this.runtimes.has(backend);
  }

  /** Runs one op of the agent in the session's sandbox, making or reconnecting it as needed. */
  async call(target: CallTarget, op: string, args: Record<string, unknown>, timeoutMs: number, options: CallOptions = {}): Promise<ToolResult> {
    const { callId, startWithinMs } = options;
    const start = startWait(startWithinMs);
    const sandbox = this.usable(target) ?? (await this.readyBy(this.acquire(target), start, target.sessionId));
    sandbox.inFlight++;
    try {
      // Ready means its agent answers too: a new container's agent may still be starting.
      const open = sandbox.channel?.isOpen ? sandbox.channel : undefined;
      const channel = open ?? (await this.readyBy(this.agentOf(sandbox, start), start, target.sessionId));
      // Checked with no await before the write: a cancel handled from here on finds the
      // request on the channel ahead of it, and the agent stops it there.
      if (callId !== undefined && this.earlyCancels.delete(cancelKey(target.tenantId, callId))) throw new CallCancelledError(callId);
      return await channel.call(op, args, timeoutMs, callId);
    } finally {
      sandbox.inFlight--;
      sandbox.lastUsed = this.now();
    }
  }

  /**
   * Runs one op of the agent in the sandbox this executor already holds for the session
   * (its channel re-attached if need be), never making one: for ops on what an earlier call
   * started there (an MCP server process), which a new sandbox would not have.
   */
  async callHeld(target: CallTarget, op: string, args: Record<string, unknown>, timeoutMs: number): Promise<ToolResult> {
    const sandbox = this.usable(target);
    if (!sandbox) throw new NoSandboxHeldError(target.sessionId);
    sandbox.inFlight++;
    try {
      return await (await this.channelOf(sandbox)).call(op, args, timeoutMs);
    } finally {
      sandbox.inFlight--;
      sandbox.lastUsed = this.now();
    }
  }

  /**
   * Runs `work` with the session's container (made if needed), counted as in use so the
   * reaper leaves it alone meanwhile: for transfers that stream through an exec of their own.
   */
  async withContainer<T>(target: CallTarget, work: (containerId: string) => Promise<T>, startWithinMs?: number): Promise<T> {
    const start = startWait(startWithinMs);
    const sandbox = this.usable(target) ?? (await this.readyBy(this.acquire(target), start, target.sessionId));
    if (!sandbox.ref.containerId) throw new BackendMismatchError(`the ${target.backend} backend has no container to transfer files through`);
    sandbox.inFlight++;
    try {
      return await work(sandbox.ref.containerId);
    } finally {
      sandbox.inFlight--;
      sandbox.lastUsed = this.now();
    }
  }

  /**
   * Stops a call: the agent kills it if it runs, or refuses it if it arrives later. A call
   * still waiting for its sandbox (being created, or the channel attaching) is refused here
   * before it is sent. Never creates a sandbox. True when a sandbox of this executor was told.
   */
  async cancel(tenantId: string, sessionId: string, callId: string): Promise<boolean> {
    const now = this.now();
    for (const [key, at] of this.earlyCancels) {
      if (now - at <= EARLY_CANCEL_TTL_MS) break; // insertion order: the rest are younger
      this.earlyCancels.delete(key);
    }
    this.earlyCancels.set(cancelKey(tenantId, callId), now);
    const channel = this.existingChannel(tenantId, sessionId);
    if (!channel) return false;
    await channel.call('cancel', { target_id: callId }, 5_000);
    return true;
  }

  /** The open channel of a sandbox this executor already holds; never creates one. */
  existingChannel(tenantId: string, sessionId: string): AgentChannel | undefined {
    const sandbox = this.live.get(sessionId);
    return sandbox?.tenantId === tenantId && sandbox.channel?.isOpen ? sandbox.channel : undefined;
  }

  /** After a broken channel: is the sandbox itself still there? A dead one is cleared away. */
  async diagnose(tenantId: string, sessionId: string): Promise<'alive' | 'dead'> {
    const sandbox = this.live.get(sessionId);
    if (!sandbox || sandbox.tenantId !== tenantId) return 'dead';
    const runtime = this.runtime(sandbox.backend);
    // The channel breaks a moment before Docker reports the container gone; look twice.
    if (await runtime.isAlive(sandbox.ref)) {
      await settle(500);
      if (await runtime.isAlive(sandbox.ref)) return 'alive';
    }
    await this.lifecycle.run(sessionId, async () => {
      if (this.live.get(sessionId) !== sandbox) return;
      this.channelErrors.sandbox_died++;
      this.forget(sandbox, 'the sandbox died');
      await runtime.destroy(sandbox.ref, true);
      await this.repo.markGone(tenantId, sessionId, 'failed', sandbox.ref.volume, 'the sandbox stopped unexpectedly');
    });
    return 'dead';
  }

  /** DELETE of the session: its sandbox and workspace go. True when there was one. */
  release(tenantId: string, sessionId: string): Promise<boolean> {
    return this.lifecycle.run(sessionId, async () => {
      const sandbox = this.live.get(sessionId);
      if (sandbox && sandbox.tenantId !== tenantId) return false;
      if (sandbox) this.forget(sandbox, 'session released');
      const record = await this.repo.find(tenantId, sessionId);
      const ours = record && record.executorId === this.executorId && record.state !== 'removed' ? record : null;
      const ref = sandbox?.ref ?? ours;
      const runtime = this.runtimes.get(sandbox?.backend ?? ours?.backend ?? 'docker');
      if (ref && runtime) await runtime.destroy(ref, false);
      if (ours) await this.repo.markGone(tenantId, sessionId, 'removed', null);
      if (ref) this.logger.info({ tenantId, sessionId }, 'sandbox removed');
      return ref !== null;
    });
  }

  /**
   * At start-up: takes back the sandboxes this executor made before it restarted. Their
   * agents kept running (shell state, background jobs); the channel opens on the next call.
   * One that did not survive (host reboot), or whose creation the restart interrupted, is
   * marked stopped with its workspace kept; the sweep that follows removes any leftovers.
   */
  async recover(): Promise<number> {
    let adopted = 0;
    for (const record of await this.repo.liveRowsOf(this.executorId)) {
      const runtime = this.runtimes.get(record.backend);
      if (!runtime || this.live.has(record.sessionId)) continue;
      if (record.state === 'creating') {
        await this.repo.markGone(record.tenantId, record.sessionId, 'stopped', record.volume);
        continue;
      }
      if (record.state !== 'ready') continue;
      if (await runtime.isAlive(record)) {
        this.remember(record, record);
        adopted++;
      } else {
        await runtime.destroy(record, true);
        await this.repo.markGone(record.tenantId, record.sessionId, 'stopped', record.volume);
      }
    }
    if (adopted > 0) this.logger.info({ adopted }, 'took back the sandboxes of the previous executor process');
    return adopted;
  }

  /** Stops and removes sandboxes that had no call for the idle TTL. */
  async reapIdle(): Promise<number> {
    let reaped = 0;
    for (const sandbox of [...this.live.values()]) {
      if (!this.isIdle(sandbox)) continue;
      await this.lifecycle.run(sandbox.sessionId, async () => {
        // Checked again under the lock, and with no await before `forget`: a call arriving
        // from here on finds no sandbox and waits for this step, then makes a new one.
        if (this.live.get(sandbox.sessionId) !== sandbox || !this.isIdle(sandbox)) return;
        this.forget(sandbox, 'idle');
        const keep = this.policy.keepWorkspaceOnIdle;
        try {
          await this.runtime(sandbox.backend).destroy(sandbox.ref, keep);
        } catch (err) {
          this.logger.warn({ err, sessionId: sandbox.sessionId }, 'reaping an idle sandbox failed; the sweep will remove it');
        }
        await this.repo.markGone(sandbox.tenantId, sandbox.sessionId, 'stopped', keep ? sandbox.ref.volume : null);
        this.logger.info({ tenantId: sandbox.tenantId, sessionId: sandbox.sessionId, keptWorkspace: keep }, 'idle sandbox stopped');
        reaped++;
      });
    }
    return reaped;
  }

  /**
   * The orphan sweep: releases sandboxes whose session was deleted while no executor
   * answered, then has each runtime remove what carries this executor's mark but belongs
   * to no live session (leftovers of a crash, pool containers of an earlier process).
   */
  async sweep(): Promise<number> {
    const started = this.now();
    const liveSessions = new Set((await this.repo.liveRowsOf(this.executorId)).map((r) => r.sessionId));
    let removed = 0;
    for (const sandbox of [...this.live.values()]) {
      if (sandbox.since < started && !liveSessions.has(sandbox.sessionId) && !this.lifecycle.has(sandbox.sessionId)) {
        if (await this.release(sandbox.tenantId, sandbox.sessionId)) removed++;
      }
    }
    for (const runtime of this.runtimes.values()) removed += await runtime.sweep(() => this.wanted());
    await this.repo.markRemovedWhereSessionGone(this.executorId);
    return removed;
  }

  /** Starts the runtimes' background work (filling the warm pool). */
  start(): void {
    // A draining executor takes no new session, so it keeps no warm sandbox either.
    const room = () => (this.refusing ? 0 : Math.max(0, this.capacity - this.occupied));
    for (const runtime of this.runtimes.values()) runtime.start(room);
  }

  /** Closes every channel; the sandboxes themselves stay for the next executor process. */
  async shutdown(): Promise<void> {
    for (const sandbox of this.live.values()) sandbox.channel?.close('executor shutting down');
    this.live.clear();
    await Promise.all([...this.runtimes.values()].map((r) => r.close()));
  }

  /**
   * What `starting` gives (the session's sandbox, or its channel), unless `start.by` passes
   * first: then the call is refused with nothing run, but the start is not abandoned. It
   * holds the session's lifecycle lock (or its `connecting` promise) and ends in a ready
   * sandbox, or a failure it logs, which the next call finds. Promise.race subscribes to
   * the start, so its later failure is never an unhandled rejection. Only a start waits
   * here: what is ready is taken without a timer.
   */
  private async readyBy<T>(starting: Promise<T>, start: StartWait | undefined, sessionId: string): Promise<T> {
    if (start === undefined) return starting;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new SandboxStartingError(sessionId, start.withinMs)), Math.max(0, start.by - Date.now()));
    });
    try {
      return await Promise.race([starting, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async acquire(target: CallTarget): Promise<LiveSandbox> {
    const known = this.usable(target);
    if (known) return known;
    return this.lifecycle.run(target.sessionId, async () => this.usable(target) ?? (await this.adoptOrCreate(target)));
  }

  private usable(target: CallTarget): LiveSandbox | undefined {
    const sandbox = this.live.get(target.sessionId);
    if (!sandbox) return undefined;
    if (sandbox.tenantId !== target.tenantId) throw new SessionNotFoundError(target.sessionId);
    if (sandbox.backend !== target.backend) throw mismatch(target, sandbox.backend);
    sandbox.lastUsed = this.now();
    return sandbox;
  }

  private async adoptOrCreate(target: CallTarget): Promise<LiveSandbox> {
    const { tenantId, sessionId, backend } = target;
    const runtime = this.runtimes.get(backend);
    if (!runtime) throw new BackendDisabledError(`this executor does not run the ${backend} backend`);
    const warm = await this.bindWarm(target, runtime);
    if (warm.sandbox) return warm.sandbox;
    const { live, record } = warm.lookup ?? (await this.repo.findForCall(tenantId, sessionId));
    if (!live) throw new SessionNotFoundError(sessionId);
    if (record && record.state !== 'removed' && record.backend !== backend) throw mismatch(target, record.backend);
    // Another executor's workspace is on another host: this one starts afresh.
    const ours = record && record.executorId === this.executorId && record.state !== 'removed' ? record : null;
    if (ours?.state === 'ready' && (await runtime.isAlive(ours))) return this.remember(target, ours);
    if (ours) {
      await runtime.destroy(ours, true);
      return this.create(target, runtime, ours.volume);
    }
    this.admitNewSession();
    this.admitting++;
    try {
      return await this.create(target, runtime, null);
    } finally {
      this.admitting--;
    }
  }

  /**
   * A warm sandbox for a session that has none yet: the session check and the binding are
   * one transaction. A session that turns out to have a sandbox (or none at all) gives the
   * warm one back, and the lookup is passed on so it is not made twice.
   */
  private async bindWarm(
    target: CallTarget,
    runtime: SandboxRuntime,
  ): Promise<{ sandbox?: LiveSandbox; lookup?: { live: boolean; record: SandboxRecord | null } }> {
    // A warm sandbox goes only to a new session, and only while new ones are taken.
    if (this.refusing || this.live.size + this.admitting >= this.capacity) return {};
    const warm = runtime.takeWarm();
    if (!warm) return {};
    const { channel, ...ref } = warm;
    let outcome: Awaited<ReturnType<SandboxRepository['bindIfNew']>>;
    this.admitting++;
    try {
      outcome = await this.repo.bindIfNew({ ...target, executorId: this.executorId, ...ref, state: 'ready' });
    } catch (err) {
      runtime.returnWarm(warm);
      throw err;
    } finally {
      this.admitting--;
    }
    if (!outcome.bound) {
      runtime.returnWarm(warm);
      return { lookup: outcome };
    }
    const sandbox = this.remember(target, ref);
    if (channel) this.useChannel(sandbox, channel);
    this.logger.info({ tenantId: target.tenantId, sessionId: target.sessionId, containerId: ref.containerId, warm: true }, 'sandbox ready');
    return { sandbox };
  }

  private async create(target: CallTarget, runtime: SandboxRuntime, workspace: string | null): Promise<LiveSandbox> {
    const { tenantId, sessionId, backend } = target;
    const started = this.now();
    const row = { tenantId, sessionId, backend, executorId: this.executorId };
    // A session without a workspace to keep (a failed first attempt) may still take a warm one.
    const warm = workspace === null ? runtime.takeWarm() : undefined;
    let provisioned: ProvisionedSandbox | undefined = warm;
    try {
      if (!provisioned) {
        // The 'creating' row is written while the sandbox starts, not before it.
        const [made, saved] = await Promise.allSettled([
          runtime.provision(tenantId, sessionId, workspace),
          this.repo.claim({ ...row, containerId: null, volume: workspace, state: 'creating' }),
        ]);
        if (made.status === 'fulfilled') provisioned = made.value;
        else throw made.reason;
        if (saved.status === 'rejected') throw saved.reason;
      }
      const { channel, ...ref } = provisioned;
      await this.repo.save({ ...row, ...ref, state: 'ready' });
      const sandbox = this.remember(target, ref);
      if (channel) this.useChannel(sandbox, channel);
      this.logger.info({ tenantId, sessionId, backend, containerId: ref.containerId, warm: !!warm, ms: this.now() - started }, 'sandbox ready');
      return sandbox;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (provisioned) await runtime.destroy(provisioned, workspace !== null).catch(() => undefined);
      // The database away: the row cannot be written either; the call is answered "try again".
      if (err instanceof SandboxQuotaError || isDatabaseUnavailable(err)) throw err;
      await this.repo.markGone(tenantId, sessionId, 'failed', workspace, message).catch(() => undefined);
      this.logger.error({ tenantId, sessionId, err }, 'sandbox creation failed');
      throw new SandboxUnavailableError(`could not start the sandbox: ${message}`);
    }
  }

  /**
   * Whether a session this executor holds nothing of may have a sandbox here. New sessions
   * being created count (`admitting`), so concurrent first calls cannot pass the last slot
   * together; the sessions it already holds, or kept a workspace for, are never refused.
   */
  private admitNewSession(): void {
    if (this.refusing) {
      throw new NewSessionRefusedError('executor_draining', `executor ${this.executorId} is ${this.refusing} and takes no new session`);
    }
    if (this.live.size + this.admitting >= this.capacity) {
      throw new NewSessionRefusedError('executor_full', `executor ${this.executorId} holds ${this.live.size} of ${this.capacity} sandboxes`);
    }
  }

  /**
   * The sandbox's channel for a call that waits for its start: an agent that has not come
   * up yet (AgentNotUpError) is "not ready, nothing ran", which the caller tries again
   * within its own start timeout, and the next try attaches afresh.
   */
  private async agentOf(sandbox: LiveSandbox, start: StartWait | undefined): Promise<AgentChannel> {
    try {
      return await this.channelOf(sandbox);
    } catch (err) {
      if (start && err instanceof AgentNotUpError) throw new SandboxStartingError(sandbox.sessionId, start.withinMs);
      throw err;
    }
  }

  private channelOf(sandbox: LiveSandbox): Promise<AgentChannel> {
    if (sandbox.channel?.isOpen) return Promise.resolve(sandbox.channel);
    sandbox.connecting ??= this.reconnect(sandbox).finally(() => (sandbox.connecting = undefined));
    return sandbox.connecting;
  }

  private async reconnect(sandbox: LiveSandbox): Promise<AgentChannel> {
    const runtime = this.runtime(sandbox.backend);
    this.channelErrors.reconnect++;
    try {
      return this.useChannel(sandbox, await runtime.connect(sandbox.ref, ATTACH_TIMEOUT_MS));
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (await runtime.isAlive(sandbox.ref)) {
        const message = `could not reach the sandbox agent: ${reason}`;
        throw sandbox.channel ? new SandboxUnavailableError(message) : new AgentNotUpError(message);
      }
    }
    // It died while idle (out of memory, a host restart): a new one, on the same workspace.
    return this.lifecycle.run(sandbox.sessionId, async () => {
      if (this.live.get(sandbox.sessionId) !== sandbox) throw new SandboxUnavailableError('the sandbox was removed meanwhile');
      this.logger.warn({ sessionId: sandbox.sessionId }, 'the sandbox stopped while idle; starting a new one on its workspace');
      this.channelErrors.sandbox_restarted++;
      await runtime.destroy(sandbox.ref, true);
      this.live.delete(sandbox.sessionId);
      const replacement = await this.create(sandbox, runtime, sandbox.ref.volume);
      // The caller holds the old object; it becomes the new one.
      Object.assign(sandbox, { ref: replacement.ref, channel: undefined, since: replacement.since });
      this.live.set(sandbox.sessionId, sandbox);
      return this.useChannel(sandbox, replacement.channel ?? (await runtime.connect(sandbox.ref, ATTACH_TIMEOUT_MS)));
    });
  }

  /** Makes `channel` the sandbox's way in, and stops the sandbox if it ever breaks the protocol. */
  private useChannel(sandbox: LiveSandbox, channel: AgentChannel): AgentChannel {
    sandbox.channel = channel;
    const ref = sandbox.ref;
    channel.onProtocolViolation((violation) => {
      this.channelErrors.protocol_violation++;
      this.quarantine(sandbox, ref, violation).catch((err: unknown) =>
        this.logger.error({ err, sessionId: sandbox.sessionId }, 'stopping a sandbox that broke the protocol failed; the sweep will remove it'),
      );
    });
    return channel;
  }

  /**
   * A sandbox that sent what its agent never sends is stopped at once: whatever wrote
   * those bytes may still run in it, and nothing it says is believed any more. Its
   * workspace is kept; the session's next call starts a new container on it, as after any
   * other death of the sandbox.
   */
  private async quarantine(sandbox: LiveSandbox, ref: SandboxRef, violation: string): Promise<void> {
    const { tenantId, sessionId } = sandbox;
    this.logger.warn({ tenantId, sessionId, containerId: ref.containerId, violation }, 'the sandbox broke the channel protocol; stopping it');
    await this.lifecycle.run(sessionId, async () => {
      // Released or replaced meanwhile: that step dealt with this container. A channel
      // opened again into the same container does not save it.
      if (this.live.get(sessionId) !== sandbox || sandbox.ref !== ref) return;
      this.forget(sandbox, 'the sandbox broke the channel protocol');
      await this.runtime(sandbox.backend).destroy(ref, true);
      await this.repo.markGone(tenantId, sessionId, 'failed', ref.volume, `the sandbox broke the channel protocol: ${violation}`);
    });
  }

  private remember(target: CallTarget, ref: SandboxRef): LiveSandbox {
    const now = this.now();
    const sandbox: LiveSandbox = {
      tenantId: target.tenantId,
      sessionId: target.sessionId,
      backend: target.backend,
      ref: { containerId: ref.containerId, volume: ref.volume },
      since: now,
      lastUsed: now,
      inFlight: 0,
    };
    this.live.set(sandbox.sessionId, sandbox);
    return sandbox;
  }

  private forget(sandbox: LiveSandbox, why: string): void {
    this.live.delete(sandbox.sessionId);
    sandbox.channel?.close(why);
  }

  private isIdle(sandbox: LiveSandbox): boolean {
    return sandbox.inFlight === 0 && this.now() - sandbox.lastUsed >= this.policy.idleTtlMs;
  }

  private async wanted(): Promise<WantedResources> {
    const rows = await this.repo.liveRowsOf(this.executorId);
    // From here on nothing awaits: memory is read in the same turn the rows arrived.
    const containers = new Set<string>();
    const volumes = new Set<string>();
    for (const row of rows) if (row.volume) volumes.add(row.volume);
    for (const sandbox of this.live.values()) {
      if (sandbox.ref.containerId) containers.add(sandbox.ref.containerId);
      if (sandbox.ref.volume) volumes.add(sandbox.ref.volume);
    }
    return { containers, volumes, busySessions: this.lifecycle.keys() };
  }

  private runtime(backend: SandboxBackend): SandboxRuntime {
    const runtime = this.runtimes.get(backend);
    if (!runtime) throw new BackendDisabledError(`this executor does not run the ${backend} backend`);
    return runtime;
  }
}

function mismatch(target: CallTarget, actual: SandboxBackend): BackendMismatchError {
  return new BackendMismatchError(
    `session ${target.sessionId} has its sandbox on the ${actual} backend; this call asked for ${target.backend}`,
  );
}

function settle(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** How long a call waits for its sandbox to start, and until when. */
interface StartWait {
  withinMs: number;
  by: number;
}

function startWait(withinMs: number | undefined): StartWait | undefined {
  return withinMs === undefined ? undefined : { withinMs, by: Date.now() + withinMs };
}

function cancelKey(tenantId: string, callId: string): string {
  return `${tenantId}/${callId}`;
}
