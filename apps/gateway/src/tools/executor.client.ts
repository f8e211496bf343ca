import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import {
  executorPingContract,
  pinnedSessionReleaseSubject,
  pinnedToolCallSubject,
  SANDBOX_STARTING,
  sessionReleaseContract,
  ToolCallReply,
  toolCallContract,
  ToolCallRequest,
  toolCancelContract,
} from '@app/contracts';
import { NATS_CLIENT, NatsClient, NatsContractClient, NatsTimeoutError } from '@app/messaging';
import { ExecutorAnnouncements } from '../executors/executor-announcements';
import { ExecutorRegistry, ExecutorStanding, MISSED_HEARTBEATS_FOR_LOSS } from '../executors/executor-registry';

/**
 * Raised when no executor answered. With `outcomeUnknown`, one took the call but its reply
 * never came: the call may or may not have run. `retryAfterSeconds` is set when trying
 * again later can work (no executor with room, the session's executor restarting).
 * `lostExecutorId` names the executor that is lost or went away, when that is why: it
 * comes back, or is given up, within the loss grace (ExecutorClient.settleLoss).
 */
export class ExecutorUnavailableError extends Error {
  constructor(
    message: string,
    readonly outcomeUnknown = false,
    readonly retryAfterSeconds?: number,
    readonly lostExecutorId?: string,
  ) {
    super(message);
  }
}

/** The tries of one call: how many were sent, and whether the latest may have reached the executor (it did not come back with "no responders"). */
interface CallTries {
  sent: number;
  open: boolean;
}

/** How long a tool call is sent again while no executor listens on its subject (see whileNobodyListens). */
const NO_RESPONDERS_PATIENCE_MS = 2_000;

/**
 * The session's executor stayed lost past RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS (or was
 * decommissioned) and RUNBOX_ON_EXECUTOR_LOSS is `fail`: its workspace is out of reach.
 */
export class ExecutorLostError extends Error {}

/** Why a call's watchers are stopped: it has its answer (or its error). */
const CALL_SETTLED = 'the call settled';

/** Replies with which an executor refuses a new session; the next executor is tried. */
const REFUSALS = new Set(['executor_full', 'executor_draining']);

/**
 * How long the gateway waits for fresh announcements before believing that no executor
 * has room, or that one went silent: its picture may be stale because it just started, or
 * because its own event loop stalled past a few heartbeats (the announcements then wait,
 * unread, in its socket). Executors answer a discovery within milliseconds.
 */
const RECHECK_WAIT_MS = 1_000;

/**
 * The least time "nobody listens" for an executor's presence must last before its process
 * is believed gone. An executor whose NATS server went away has no subscriptions on the
 * cluster until its connection has reconnected to another server and subscribed again; its
 * heartbeats are missed meanwhile too, so a probe then also finds nobody although the
 * process is alive and will answer. This outlasts that reconnect (the client tries the
 * other servers within a quarter second each, on a machine that may be busy); the loss
 * window, when longer, is waited out once more instead.
 */
const GONE_CONFIRM_MS = 5_000;

/**
 * How long one try of a call gives its session's sandbox to start before the executor
 * answers "not ready yet". Cold starts take about a second; this is for a busy host.
 */
const START_SLICE_MS = 5_000;

/** The gateway's side of the executor contracts: a Nest client over the NATS adapter. */
@Injectable()
export class ExecutorClient extends NatsContractClient {
  constructor(
    @Inject(NATS_CLIENT) nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly executors: ExecutorRegistry,
    private readonly announcements: ExecutorAnnouncements,
  ) {
    super(nats);
  }

  /**
   * Runs a sandbox call: on the session's executor, or, for a session without one, on the
   * executor with the most free capacity (docs/scaling.md). A session whose executor is
   * lost answers at once (no call is sent into the void); past the grace, the loss policy
   * decides.
   */
  async callTool(request: ToolCallRequest, executorId: string | null): Promise<ToolCallReply> {
    if (!executorId) return this.place(request);
    const standing = await this.confirmedStanding(executorId);
    if (standing.kind === 'serving') return this.callOn(request, executorId);
    if (standing.kind === 'lost') {
      throw new ExecutorUnavailableError(
        `executor ${executorId}, which holds this session's sandbox, has not been heard from for ${seconds(standing.silentMs)} s; ` +
          `its sessions wait up to ${seconds(standing.graceLeftMs)} s more for it to come back`,
        false,
        this.retryAfterSeconds,
        executorId,
      );
    }
    const why = standing.why === 'decommissioned' ? `executor ${executorId} was decommissioned` : `executor ${executorId} has been gone for ${seconds(standing.silentMs)} s`;
    if (this.config.RUNBOX_ON_EXECUTOR_LOSS === 'fail') {
      throw new ExecutorLostError(`${why}, and with it this session's sandbox and workspace; start a new session`);
    }
    const reply = await this.place(request, new Set([executorId]));
    if (!reply.ok) return reply;
    const note = `[note: ${why}, and with it this session's workspace: this call ran in a new, empty sandbox; files and state from before are lost]`;
    return { ...reply, result: { ...reply.result, output: `${note}\n${reply.result.output}`, metadata: { ...reply.result.metadata, workspace_lost: true } } };
  }

  /**
   * A new session's first call: offered to the executors with room, most free first, until
   * one takes it. An executor that filled up meanwhile (another gateway placed there) or
   * began draining refuses before anything runs, so the next is tried.
   */
  private async place(request: ToolCallRequest, exclude: ReadonlySet<string> = new Set()): Promise<ToolCallReply> {
    const tried = new Set(exclude);
    let refusal: string | undefined;
    let rechecked = false;
    for (;;) {
      let [next] = this.executors.candidates(tried);
      if (!next && !rechecked) {
        rechecked = true;
        const askedAt = this.executors.mark();
        await this.announcements.askAndWait(RECHECK_WAIT_MS);
        this.executors.recounted(askedAt);
        [next] = this.executors.candidates(tried);
      }
      if (!next) {
        const serving = this.executors.list().some((e) => e.standing === 'serving' && e.state === 'ready');
        const why = serving ? 'no executor has room for a new session' : 'no executor is serving sandboxes (none has announced itself ready)';
        throw new ExecutorUnavailableError(`${why}${refusal ? ` (${refusal})` : ''}; try again shortly`, false, this.retryAfterSeconds);
      }
      tried.add(next);
      const settled = this.executors.placed(next);
      try {
        const reply = await this.callOn(request, next).finally(settled);
        if (reply.ok || !REFUSALS.has(reply.error.code)) return reply;
        refusal = reply.error.message;
      } catch (err) {
        // Gone between its announcement and now: nothing ran, the next one may take it.
        if (err instanceof ExecutorUnavailableError && !err.outcomeUnknown) continue;
        throw err;
      }
    }
  }

  /**
   * One call on one executor, asked again while its sandbox is still starting there. Each
   * try gives the start START_SLICE_MS, after which the executor answers `sandbox_starting`
   * with nothing run (the start goes on), so a try's wait is the tool's limit plus the
   * slice plus the grace, and a reply lost on the way is noticed as soon as it would be
   * without the start. The tries go to the same executor, which holds the starting sandbox
   * (placed afresh, a session's first call could start a second one elsewhere), until the
   * deployment's start timeout has passed.
   */
  private async callOn(request: ToolCallRequest, executorId: string): Promise<ToolCallReply> {
    const budgetMs = this.config.RUNBOX_SANDBOX_START_TIMEOUT_SECONDS * 1000;
    const startBy = Date.now() + budgetMs;
    for (;;) {
      const sliceMs = Math.max(1, Math.min(START_SLICE_MS, startBy - Date.now()));
      const reply = await this.callOnce({ ...request, start_timeout_ms: sliceMs }, executorId);
      if (reply.ok || reply.error.code !== SANDBOX_STARTING) return reply;
      if (Date.now() >= startBy) {
        const message = `the session's sandbox was not ready within ${seconds(budgetMs)} s (the host is busy starting sandboxes); nothing ran; try again shortly`;
        return { ...reply, error: { ...reply.error, message } };
      }
    }
  }

  /**
   * One try on one executor's own subject. An executor whose process is gone while the
   * call is out ends the wait at once (the call may or may not have run), rather than at
   * its time limit.
   */
  private async callOnce(request: ToolCallRequest & { start_timeout_ms: number }, executorId: string): Promise<ToolCallReply> {
    const stopWatching = new AbortController();
    const tries: CallTries = { sent: 0, open: false };
    const send = async (): Promise<ToolCallReply> => {
      tries.sent++;
      tries.open = true;
      try {
        return await this.request(
          {
            contract: toolCallContract,
            timeoutMs: request.start_timeout_ms + request.timeout_ms + this.config.RUNBOX_EXECUTOR_GRACE_MS,
            subject: pinnedToolCallSubject(executorId),
          },
          // The deployment, never the tenant, decides where sandbox tools run.
          { ...request, backend: this.config.RUNBOX_SANDBOX_BACKEND },
        );
      } catch (err) {
        if (err instanceof NatsTimeoutError && err.noResponders) tries.open = false;
        throw err;
      }
    };
    try {
      return await Promise.race([this.whileNobodyListens(send, stopWatching.signal), this.goneDuring(executorId, stopWatching.signal, tries)]);
    } catch (err) {
      if (err instanceof NatsTimeoutError) {
        throw new ExecutorUnavailableError(
          err.noResponders
            ? `executor ${executorId} is not answering (restarting or gone); try again shortly`
            : 'the executor did not answer in time; the tool call may or may not have run',
          !err.noResponders,
          err.noResponders ? this.retryAfterSeconds : undefined,
          err.noResponders ? executorId : undefined,
        );
      }
      throw err;
    } finally {
      // With a reason of its own: without one, abort() makes a DOMException, stack and all,
      // on every call for a reason nobody reads.
      stopWatching.abort(CALL_SETTLED);
    }
  }

  /**
   * Sends again, for a short while, a request nobody was listening for. No responders means
   * no executor received it, so nothing ran and sending again is safe; and an executor whose
   * NATS server just went away is without its subscriptions for the moment it takes to
   * reconnect to another server of the cluster. An executor that is really gone is still
   * reported within NO_RESPONDERS_PATIENCE_MS.
   */
  private async whileNobodyListens<T>(send: () => Promise<T>, stop?: AbortSignal): Promise<T> {
    const deadline = Date.now() + NO_RESPONDERS_PATIENCE_MS;
    for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
      try {
        return await send();
      } catch (err) {
        if (!(err instanceof NatsTimeoutError && err.noResponders) || Date.now() + pause > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, pause));
        // The caller stopped waiting (it answered "try again"): sending now could run the call unseen.
        if (stop?.aborted) throw err;
      }
    }
  }

  /**
   * Rejects once `executorId`'s process is gone; never settles otherwise. Missed heartbeats
   * only raise the question: the executor is then asked directly, and only "nobody listens
   * for it" (NATS dropped its process's connection: a crash, a kill -9, an exit) ends the
   * call. An executor that is merely slow (its event loop, or this machine, busy past a few
   * heartbeats) still holds its connection, so its call goes on to its reply or its time
   * limit: a call it took is never reported lost while it may still answer.
   *
   * Whether the call may have run is read from the tries, not guessed: NATS answers the
   * requests of one connection in order, so once the probe found nobody, a try sent before
   * it that also found nobody has had its "no responders" (its handler runs before the
   * next turn of the event loop). A try still open then was taken by the process that is
   * now gone. A try sent after the probe (whileNobodyListens sending again) is left to the
   * next probe.
   */
  private goneDuring(executorId: string, stop: AbortSignal, tries: CallTries): Promise<never> {
    return new Promise((_, reject) => {
      let checking = false;
      // When the probes began to find nobody, without an answer or a heartbeat since.
      let nobodySince: number | undefined;
      const check = async (): Promise<void> => {
        const sentBefore = tries.sent;
        const presence = await this.announcements.presence(executorId, Math.min(RECHECK_WAIT_MS, this.heartbeatMs));
        if (presence !== 'gone') {
          nobodySince = undefined;
          return;
        }
        nobodySince ??= Date.now();
        if (Date.now() - nobodySince < this.goneConfirmMs) return;
        await new Promise((resolve) => setImmediate(resolve));
        if (stop.aborted || (tries.open && tries.sent > sentBefore)) return;
        clearInterval(timer);
        reject(
          tries.open
            ? new ExecutorUnavailableError(`executor ${executorId} went away during the call; the tool call may or may not have run`, true, undefined, executorId)
            : new ExecutorUnavailableError(`executor ${executorId} is not answering (restarting or gone); nothing ran; try again shortly`, false, this.retryAfterSeconds, executorId),
        );
      };
      const timer = setInterval(() => {
        if (this.executors.standing(executorId).kind === 'serving') {
          nobodySince = undefined;
          return;
        }
        if (checking) return;
        checking = true;
        void check().finally(() => (checking = false));
      }, this.heartbeatMs / 2);
      stop.addEventListener('abort', () => clearInterval(timer), { once: true });
    });
  }

  /**
   * Waits while `executorId` is lost: resolves `serving` once it is heard from again, and
   * `gone` once its loss grace is over (or it is decommissioned), when RUNBOX_ON_EXECUTOR_LOSS
   * applies to its sessions. Bounded by the grace; rejects with `signal`'s reason when aborted.
   */
  async settleLoss(executorId: string, signal: AbortSignal): Promise<'serving' | 'gone'> {
    for (;;) {
      signal.throwIfAborted();
      // Paced by the wait for its announcement inside (up to a heartbeat, a second at most).
      const standing = await this.confirmedStanding(executorId);
      if (standing.kind !== 'lost') return standing.kind;
    }
  }

  /** The executor's standing; one that looks silent is asked to announce itself before the silence is believed. */
  private async confirmedStanding(executorId: string): Promise<ExecutorStanding> {
    const standing = this.executors.standing(executorId);
    if (standing.kind === 'serving') return standing;
    await this.announcements.askAndWait(Math.min(RECHECK_WAIT_MS, this.heartbeatMs), executorId);
    return this.executors.standing(executorId);
  }

  /** How long the probes must find nobody before the process is believed gone: past a NATS reconnect, and past the loss window once more. */
  private get goneConfirmMs(): number {
    return Math.max(GONE_CONFIRM_MS, MISSED_HEARTBEATS_FOR_LOSS * this.heartbeatMs);
  }

  private get heartbeatMs(): number {
    return this.config.RUNBOX_EXECUTOR_HEARTBEAT_SECONDS * 1000;
  }

  /** What a 503 invites: about one heartbeat, by when a restarted executor has announced itself. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.config.RUNBOX_EXECUTOR_HEARTBEAT_SECONDS));
  }

  cancelTool(tenantId: string, sessionId: string, callId: string): void {
    this.notify(toolCancelContract, { tenant_id: tenantId, session_id: sessionId, call_id: callId });
  }

  /** Asks the session's executor to remove its sandbox. False when no executor answered, or the one that did could not. */
  async releaseSession(tenantId: string, sessionId: string, executorId: string | null): Promise<boolean> {
    // A lost executor would not answer; its sweep removes the sandbox if it ever comes back.
    if (executorId && (await this.confirmedStanding(executorId)).kind !== 'serving') return false;
    const subject = executorId ? pinnedSessionReleaseSubject(executorId) : undefined;
    try {
      const reply = await this.request({ contract: sessionReleaseContract, timeoutMs: 30_000, subject }, { tenant_id: tenantId, session_id: sessionId });
      return !('ok' in reply);
    } catch (err) {
      if (err instanceof NatsTimeoutError) return false;
      throw err;
    }
  }

  async ping(timeoutMs = 2_000): Promise<{ executor_id: string; docker: boolean } | null> {
    try {
      const reply = await this.request({ contract: executorPingContract, timeoutMs }, {});
      return 'ok' in reply ? null : reply;
    } catch {
      return null;
    }
  }
}

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}
