import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResult, ErrorCode, McpError, Tool, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

/** A connected MCP client and how to let go of it (ends the transport: a socket, a sandbox process). */
export interface McpLink {
  client: Client;
  close(): Promise<void>;
}

/** A server as the cache needs it: `key` names the connection, `version` its configuration. */
export interface McpTarget {
  /** `<tenant>:<server id>`, plus `:<session>` for stdio servers, whose process lives in one session's sandbox. */
  key: string;
  version: number;
  /** Connects (the MCP `initialize` handshake included) within `timeoutMs`. */
  connect(timeoutMs: number): Promise<McpLink>;
  /** Called after each connection attempt, listing or call that says something about the server's health. */
  onHealth(health: McpHealthReport): void;
}

export type McpHealthReport = { ok: true; at: Date } | { ok: false; at: Date; error: string; parked: boolean };

export type McpListing = { ok: true; tools: Tool[] } | { ok: false; error: string };

export interface McpLimits {
  connectTimeoutMs: number;
  listTimeoutMs: number;
  /** How long a listing is answered from the cache without asking the server again. */
  listFreshMs: number;
  /** Tools kept per server; a longer list is cut (and said so in the log). */
  maxTools: number;
  /** First reconnect delay after a failure; doubled at each further failure up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** After this many failures in a row the server is parked: not tried again for parkMs. */
  parkAfterFailures: number;
  parkMs: number;
  /** A connection nobody used for this long is closed. */
  idleMs: number;
}

export const MCP_LIMITS: McpLimits = {
  connectTimeoutMs: 5_000,
  listTimeoutMs: 5_000,
  listFreshMs: 60_000,
  maxTools: 128,
  backoffMs: 1_000,
  maxBackoffMs: 60_000,
  parkAfterFailures: 5,
  parkMs: 5 * 60_000,
  idleMs: 10 * 60_000,
};

/** Pages of tools/list followed before giving up on a server that keeps sending cursors. */
const MAX_LIST_PAGES = 10;

interface Entry {
  version: number;
  link?: Promise<McpLink>;
  tools?: Tool[];
  listedAt: number;
  /** Set by notifications/tools/list_changed: the next listing asks the server. */
  stale: boolean;
  refreshing?: Promise<McpListing>;
  failures: number;
  retryAt: number;
  parked: boolean;
  lastError?: string;
  usedAt: number;
  /** Calls under way: a connection is never closed as idle while one runs. */
  calls: number;
}

/**
 * The gateway's MCP connections, one per server configuration (and session, for stdio): a
 * listing is answered from the cache while fresh, so each model turn and GET /v1/tools stay
 * cheap; `notifications/tools/list_changed` makes the next listing ask again. A failure
 * drops the connection and backs off (1 s, 2 s, 4 s ... up to a minute) before the next
 * attempt; a server that failed `parkAfterFailures` times in a row is parked and re-probed
 * after `parkMs`. Slow tool calls time out without counting against the server.
 */
export class McpConnections {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly limits: McpLimits = MCP_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  async tools(target: McpTarget): Promise<McpListing> {
    const entry = this.entry(target);
    if (entry.tools && !entry.stale && this.now() - entry.listedAt < this.limits.listFreshMs) return { ok: true, tools: entry.tools };
    const waiting = this.waiting(entry);
    if (waiting) return { ok: false, error: waiting };
    entry.refreshing ??= this.refresh(target, entry).finally(() => (entry.refreshing = undefined));
    return entry.refreshing;
  }

  /**
   * Calls a tool. A tool's own error, a timeout or a refused call is the call's result; a
   * broken connection counts against the server (and the next call reconnects).
   */
  async call(target: McpTarget, tool: string, args: Record<string, unknown>, options: { timeoutMs: number; signal?: AbortSignal }): Promise<CallToolResult> {
    const entry = this.entry(target);
    const waiting = this.waiting(entry);
    if (waiting) return errorResult(`the MCP server is unavailable: ${waiting}`);
    entry.calls++;
    try {
      const result = await this.withSession(target, entry, async (link) => {
        const answer = await link.client.callTool({ name: tool, arguments: args }, undefined, { timeout: options.timeoutMs, signal: options.signal });
        return answer as CallToolResult;
      });
      this.succeed(target, entry);
      return result;
    } catch (err) {
      if (err instanceof ConnectFailedError) {
        this.fail(target, entry, err.cause);
        return errorResult(`could not connect to the MCP server: ${messageOf(err.cause)}`);
      }
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) return errorResult(`${tool} did not answer within ${options.timeoutMs / 1000} s`);
      if (options.signal?.aborted) return errorResult(`${tool} was cancelled`);
      if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed) return errorResult(`the MCP server refused the call: ${messageOf(err)}`);
      this.fail(target, entry, err);
      return errorResult(`the MCP server failed: ${messageOf(err)}`);
    } finally {
      entry.calls--;
      entry.usedAt = this.now();
    }
  }

  /** Drops every connection of a server (its configuration changed or it was deleted). */
  forget(keyPrefix: string): Promise<void> {
    return this.forgetWhere((key) => key === keyPrefix || key.startsWith(`${keyPrefix}:`));
  }

  /** Drops, and closes, every connection whose key `match`es (e.g. those into a deleted session's sandbox). */
  async forgetWhere(match: (key: string) => boolean): Promise<void> {
    const closing: Array<Promise<void>> = [];
    for (const [key, entry] of this.entries) {
      if (!match(key)) continue;
      this.entries.delete(key);
      closing.push(closeLink(entry));
    }
    await Promise.all(closing);
  }

  /** The keys of the connections held (open, or remembered with their backoff). */
  keys(): string[] {
    return [...this.entries.keys()];
  }

  async closeAll(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map(closeLink));
  }

  private entry(target: McpTarget): Entry {
    this.closeIdle();
    let entry = this.entries.get(target.key);
    if (entry && entry.version !== target.version) {
      void closeLink(entry);
      entry = undefined;
    }
    if (!entry) {
      entry = { version: target.version, listedAt: 0, stale: false, failures: 0, retryAt: 0, parked: false, usedAt: this.now(), calls: 0 };
      this.entries.set(target.key, entry);
    }
    entry.usedAt = this.now();
    return entry;
  }

  /** Why the server is not tried now (backing off or parked), or undefined when it may be. */
  private waiting(entry: Entry): string | undefined {
    const left = entry.retryAt - this.now();
    if (left <= 0) return undefined;
    const when = `${Math.ceil(left / 1000)} s`;
    return entry.parked ? `${entry.lastError} (parked after ${entry.failures} failures in a row; probed again in ${when})` : `${entry.lastError} (retrying in ${when})`;
  }

  private async refresh(target: McpTarget, entry: Entry): Promise<McpListing> {
    try {
      const tools = await this.withSession(target, entry, (link) => {
        // Marked fresh before asking: a list_changed that arrives while the list is on its way marks it stale again.
        entry.stale = false;
        return this.listAll(link.client);
      });
      entry.tools = tools;
      entry.listedAt = this.now();
      this.succeed(target, entry);
      return { ok: true, tools };
    } catch (err) {
      this.fail(target, entry, err instanceof ConnectFailedError ? err.cause : err);
      return { ok: false, error: entry.lastError! };
    }
  }

  private async listAll(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES && tools.length < this.limits.maxTools; page++) {
      const answer = await client.listTools(cursor ? { cursor } : undefined, { timeout: this.limits.listTimeoutMs });
      tools.push(...answer.tools);
      cursor = answer.nextCursor;
      if (!cursor) break;
    }
    return tools.slice(0, this.limits.maxTools);
  }

  /**
   * Runs `work` on the server's connection. A server that forgot the connection's session (it
   * restarted) answers 404 without having run anything, so the work is done once more on a new
   * connection rather than counted as a failure. A connection that cannot be made throws
   * ConnectFailedError.
   */
  private async withSession<T>(target: McpTarget, entry: Entry, work: (link: McpLink) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const link = await this.linkOf(target, entry).catch((err: unknown) => Promise.reject(new ConnectFailedError(err)));
      try {
        return await work(link);
      } catch (err) {
        if (attempt > 0 || !(err instanceof StreamableHTTPError && err.code === 404)) throw err;
        await closeLink(entry);
      }
    }
  }

  private linkOf(target: McpTarget, entry: Entry): Promise<McpLink> {
    if (!entry.link) {
      const link = target.connect(this.limits.connectTimeoutMs).then((connected) => {
        connected.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          entry.stale = true;
        });
        connected.client.onclose = () => {
          if (entry.link === link) entry.link = undefined;
        };
        return connected;
      });
      entry.link = link;
      // A failed connect is not kept: the next attempt (after the backoff) connects again.
      link.catch(() => {
        if (entry.link === link) entry.link = undefined;
      });
    }
    return entry.link;
  }

  private succeed(target: McpTarget, entry: Entry): void {
    entry.failures = 0;
    entry.retryAt = 0;
    entry.parked = false;
    entry.lastError = undefined;
    target.onHealth({ ok: true, at: new Date(this.now()) });
  }

  private fail(target: McpTarget, entry: Entry, err: unknown): void {
    void closeLink(entry);
    entry.tools = undefined;
    entry.failures++;
    entry.lastError = messageOf(err);
    entry.parked = entry.failures >= this.limits.parkAfterFailures;
    const delay = entry.parked ? this.limits.parkMs : Math.min(this.limits.backoffMs * 2 ** (entry.failures - 1), this.limits.maxBackoffMs);
    entry.retryAt = this.now() + delay;
    target.onHealth({ ok: false, at: new Date(this.now()), error: entry.lastError, parked: entry.parked });
  }

  private closeIdle(): void {
    const cutoff = this.now() - this.limits.idleMs;
    for (const [key, entry] of this.entries) {
      if (entry.usedAt >= cutoff || entry.refreshing || entry.calls > 0) continue;
      this.entries.delete(key);
      void closeLink(entry);
    }
  }
}

/** The connection could not be made (as opposed to a request on it failing). */
class ConnectFailedError extends Error {
  constructor(override readonly cause: unknown) {
    super(messageOf(cause));
  }
}

async function closeLink(entry: Entry): Promise<void> {
  const link = entry.link;
  entry.link = undefined;
  if (!link) return;
  await link.then((l) => l.close()).catch(() => undefined);
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** An error's message, bounded: it is shown to the model, in run events and in the API. */
export function messageOf(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.length > 500 ? `${message.slice(0, 500)}…` : message;
}
