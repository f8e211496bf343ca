import { Inject, Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { LOGGER } from '@app/logging';
import { ToolResult } from '@app/contracts';
import type { Logger } from 'pino';
import { QuotasService } from '../quotas/quotas.service';
import { ExecutorClient } from '../tools/executor.client';
import { ToolRegistry } from '../tools/tool-registry';
import {
  InvalidToolArgumentsError,
  ToolRouter,
  ToolInfrastructureError,
  UnknownToolError,
} from '../tools/tool-router';
import { BrowserPool } from '../web/browser/browser-pool';
import { SessionReleaseHooks } from './session-release-hooks';
import { SessionRouteCache } from './session-route-cache';
import { SessionRunsCanceller } from './session-runs-canceller';
import { MessageView, SessionsRepository, SessionView } from './sessions.repository';

/** A sandbox frees up when a session is deleted or its idle container is reaped. */
const SANDBOX_RETRY_SECONDS = 30;
/** How long a session found live routes sandbox tool calls without another database check. */
const ROUTE_TTL_MS = 2_000;

@Injectable()
export class SessionsService {
  private readonly routes = new SessionRouteCache(ROUTE_TTL_MS);

  constructor(
    private readonly sessions: SessionsRepository,
    private readonly executor: ExecutorClient,
    private readonly tools: ToolRouter,
    private readonly registry: ToolRegistry,
    private readonly quotas: QuotasService,
    private readonly runs: SessionRunsCanceller,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly browsers: BrowserPool,
    private readonly releaseHooks: SessionReleaseHooks,
  ) {}

  create(tenantId: string, metadata: Record<string, unknown>): Promise<SessionView> {
    return this.quotas.admit(tenantId, () => this.sessions.create(tenantId, metadata));
  }

  async get(tenantId: string, id: string): Promise<SessionView> {
    const session = await this.sessions.find(tenantId, id);
    if (!session) throw AppError.notFound('session', id);
    return session;
  }

  /** A page of the tenant's live sessions, newest first; `cursor` is the previous page's next_cursor. */
  async list(tenantId: string, limit: number, cursor?: string): Promise<{ sessions: SessionView[]; nextCursor: string | null }> {
    const after = cursor === undefined ? undefined : decodeSessionCursor(cursor);
    // One more than asked tells whether another page follows, without a count.
    const rows = await this.sessions.list(tenantId, limit + 1, after);
    const sessions = rows.slice(0, limit);
    const last = sessions[sessions.length - 1];
    return { sessions, nextCursor: rows.length > limit && last ? encodeSessionCursor(last) : null };
  }

  /**
   * Marks the session deleted (so no run can start on it), cancels its runs that have not
   * ended, then has its executor remove the container and volume.
   */
  async delete(tenantId: string, id: string): Promise<void> {
    const session = await this.get(tenantId, id);
    this.routes.forget(tenantId, id);
    await this.sessions.markDeleted(tenantId, id);
    const cancelled = await this.runs.cancelSessionRuns(tenantId, id);
    if (cancelled > 0) this.logger.info({ tenantId, sessionId: id, cancelled }, 'cancelled the runs of a deleted session');
    // This replica's browser context for it; another replica's closes when it idles.
    await this.browsers.release(tenantId, id);
    // Before the sandbox goes: what runs in it (stdio MCP servers) is stopped by those who started it.
    for (const err of await this.releaseHooks.run(tenantId, id)) {
      this.logger.warn({ tenantId, sessionId: id, error: err instanceof Error ? err.message : String(err) }, 'could not let go of a deleted session’s resources');
    }
    const released = await this.executor.releaseSession(tenantId, id, session.executorId);
    if (!released) {
      // The executor's orphan sweep removes it: the session is no longer live.
      this.logger.warn({ tenantId, sessionId: id }, 'no executor answered the release; the sweep will remove the sandbox');
    }
  }

  async messages(tenantId: string, id: string, options: { includeSubRuns?: boolean } = {}): Promise<MessageView[]> {
    await this.get(tenantId, id);
    return this.sessions.listMessages(tenantId, id, options);
  }

  /** POST /v1/sessions/{id}/tools/{name}: one tool call in the sandbox, no model involved. */
  async runTool(tenantId: string, id: string, name: string, args: unknown): Promise<ToolResult> {
    // Only sandbox tools may skip the check: the executor re-checks (see SessionRouteCache);
    // a tool that runs in the gateway has nothing after this to refuse a deleted session.
    const inSandbox = this.registry.get(name)?.runsIn === 'sandbox';
    let executorId = inSandbox ? this.routes.get(tenantId, id) : undefined;
    let checkedAt: number | undefined;
    if (executorId === undefined) {
      checkedAt = this.routes.time();
      const route = await this.sessions.toolRoute(tenantId, id);
      if (!route) throw AppError.notFound('session', id);
      executorId = route.executorId ?? undefined;
    }
    try {
      const { executorId: servedBy, ...result } = await this.tools.execute({ tenantId, sessionId: id, executorId: executorId ?? null }, name, args);
      if (inSandbox && checkedAt !== undefined && servedBy) this.routes.set(tenantId, id, servedBy, checkedAt);
      return result;
    } catch (err) {
      this.routes.forget(tenantId, id);
      if (err instanceof UnknownToolError) throw AppError.notFound('tool', name);
      if (err instanceof InvalidToolArgumentsError) throw AppError.validation(err.message);
      if (err instanceof ToolInfrastructureError) {
        if (err.kind === 'not_found') throw AppError.notFound('session', id);
        if (err.kind === 'quota_exceeded') {
          throw new AppError(ErrorCode.QuotaExceeded, err.message, { limit: 'max_sandboxes' }, SANDBOX_RETRY_SECONDS);
        }
        if (err.kind === 'executor_lost') throw new AppError(ErrorCode.ExecutorLost, err.message);
        const code = err.kind === 'executor_unavailable' ? ErrorCode.ExecutorUnavailable : ErrorCode.SandboxFailed;
        // A call the executor took but never answered may have run: no Retry-After invites
        // the client to repeat it blindly; the body says to check its effects first.
        if (err.outcomeUnknown) throw new AppError(code, `${err.message}; check its effects before repeating it`, { outcome_unknown: true });
        throw new AppError(code, err.message, undefined, err.kind === 'executor_unavailable' ? (err.retryAfterSeconds ?? 5) : undefined);
      }
      throw err;
    }
  }
}

/** The position after a session in the newest-first order: opaque to clients (base64url JSON). */
function encodeSessionCursor(session: SessionView): string {
  return Buffer.from(JSON.stringify([session.createdAt.toISOString(), session.id])).toString('base64url');
}

function decodeSessionCursor(cursor: string): { createdAt: Date; id: string } {
  const invalid = () => AppError.validation('query.cursor: not a cursor this list returned (pass next_cursor as it came)');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') throw invalid();
  const createdAt = new Date(parsed[0]);
  if (Number.isNaN(createdAt.getTime()) || parsed[1].length > 64) throw invalid();
  return { createdAt, id: parsed[1] };
}
