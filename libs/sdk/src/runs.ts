import { ConnectionError, TimeoutError } from './errors';
import { PagedList } from './pagination';
import { retryDelayMs, sleep } from './retry';
import { readSse } from './sse';
import { RequestOptions, Transport } from './transport';
import { ApprovalResult, CreateRunBody, Run, RunEvent, RunListParams, TERMINAL_EVENT_TYPES, TERMINAL_RUN_STATUSES } from './types';

export interface CreateRunOptions extends RequestOptions {
  /** A repeated create with the same key returns the first run instead of starting another (and may be retried safely). */
  idempotencyKey?: string;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Start after this event id (the events up to it were seen already). */
  lastEventId?: number;
  /** Reconnections in a row without a new event before the stream gives up (default 5). */
  maxReconnects?: number;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up (TimeoutError) after this long; by default wait as long as the run takes. */
  timeoutMs?: number;
}

const enc = encodeURIComponent;

/** Runs: start one, follow its events, decide its approvals, cancel it. */
export class Runs {
  constructor(private readonly transport: Transport) {}

  create(body: CreateRunBody, options: CreateRunOptions = {}): Promise<Run> {
    return this.transport.json<Run>({ ...options, method: 'POST', path: '/v1/runs', json: body });
  }

  get(runId: string, options: RequestOptions = {}): Promise<Run> {
    return this.transport.json<Run>({ ...options, method: 'GET', path: `/v1/runs/${enc(runId)}` });
  }

  /** Runs newest first; `await` for the page or `for await` over the runs. */
  list(params: RunListParams = {}, options: RequestOptions = {}): PagedList<Run> {
    return new PagedList<Run>((cursor, opts) => this.transport.json({ ...opts, method: 'GET', path: '/v1/runs', query: { ...params, cursor } }), options);
  }

  cancel(runId: string, options: RequestOptions = {}): Promise<Run> {
    return this.transport.json<Run>({ ...options, method: 'POST', path: `/v1/runs/${enc(runId)}/cancel`, json: {} });
  }

  /** Lets a tool call that waits for approval run. */
  approve(runId: string, toolCallId: string, options: RequestOptions & { reason?: string } = {}): Promise<ApprovalResult> {
    return this.decide(runId, toolCallId, 'approve', options);
  }

  /** Refuses a tool call that waits for approval; the model is told the reason. */
  deny(runId: string, toolCallId: string, options: RequestOptions & { reason?: string } = {}): Promise<ApprovalResult> {
    return this.decide(runId, toolCallId, 'deny', options);
  }

  private decide(runId: string, toolCallId: string, decision: 'approve' | 'deny', options: RequestOptions & { reason?: string }): Promise<ApprovalResult> {
    const { reason, ...rest } = options;
    const json = { tool_call_id: toolCallId, decision, ...(reason ? { reason } : {}) };
    return this.transport.json<ApprovalResult>({ ...rest, method: 'POST', path: `/v1/runs/${enc(runId)}/approvals`, json });
  }

  /**
   * The run's events, oldest first, until its terminal event (`run.completed`, `run.failed`,
   * `run.cancelled`). A dropped connection is reopened with Last-Event-ID, and events at or
   * below the last one yielded are skipped, so no event is missed or yielded twice.
   */
  async *stream(runId: string, options: StreamOptions = {}): AsyncGenerator<RunEvent> {
    let last = options.lastEventId ?? 0;
    const maxReconnects = options.maxReconnects ?? 5;
    let failures = 0;
    for (;;) {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (last > 0) headers['last-event-id'] = String(last);
      let dropped: unknown;
      let received = false;
      try {
        const res = await this.transport.send({ method: 'GET', path: `/v1/runs/${enc(runId)}/events`, headers, signal: options.signal });
        if (!res.body) throw new ConnectionError('the event stream answered without a body');
        for await (const message of readSse(res.body)) {
          const id = Number(message.id);
          if (!Number.isSafeInteger(id) || id <= last) continue;
          const event = { id, type: message.event, data: JSON.parse(message.data) as unknown } as RunEvent;
          last = id;
          failures = 0;
          received = true;
          yield event;
          if (TERMINAL_EVENT_TYPES.has(event.type)) return;
        }
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        // Answers with an error status (404, 401, ...) are final; a broken connection is not.
        if (!(err instanceof ConnectionError) && !isNetworkError(err)) throw err;
        dropped = err;
      }
      // Resumed at or after the terminal event, the server has nothing more to send.
      if (dropped === undefined && !received && TERMINAL_RUN_STATUSES.has((await this.get(runId, { signal: options.signal })).status)) return;
      // The stream ended before the terminal event (a dropped connection, a restarting gateway).
      failures++;
      if (failures > maxReconnects) {
        throw new ConnectionError(`the event stream of ${runId} broke ${failures} times in a row without a new event`, { cause: dropped });
      }
      await sleep(retryDelayMs(failures, this.transport.options.retry, null)!, options.signal);
    }
  }

  /** Waits for the run to end (completed, failed or cancelled) and returns it. */
  async wait(runId: string, options: WaitOptions = {}): Promise<Run> {
    const timeout = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
    const signals = [options.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 0 ? AbortSignal.any(signals) : undefined;
    try {
      for await (const _event of this.stream(runId, { signal })) {
        // Only the end matters here.
      }
      return await this.get(runId, { signal });
    } catch (err) {
      if (timeout?.aborted && !options.signal?.aborted) throw new TimeoutError(`run ${runId} did not end within ${options.timeoutMs} ms`);
      throw err;
    }
  }
}

/**
 * Errors fetch's body stream throws when the connection breaks mid-answer. Checked by shape,
 * not instanceof: fetch may come from another realm (a test runner's sandbox, a polyfill).
 */
function isNetworkError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { name, message, code, cause } = err as { name?: unknown; message?: unknown; code?: unknown; cause?: { code?: unknown } };
  if (name === 'TypeError' && typeof message === 'string' && /terminated|fetch failed|network/i.test(message)) return true;
  const errno = code ?? cause?.code;
  return typeof errno === 'string' && /^(ECONNRESET|EPIPE|ECONNREFUSED|UND_ERR_SOCKET|UND_ERR_CLOSED|ETIMEDOUT)$/.test(errno);
}
