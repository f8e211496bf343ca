import { Injectable } from '@nestjs/common';
import { newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { RunOptions } from './run-options';

export type RunStatus = 'queued' | 'running' | 'requires_approval' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: RunStatus[] = ['completed', 'failed', 'cancelled'];

export interface RunView {
  id: string;
  tenantId: string;
  sessionId: string;
  parentRunId: string | null;
  status: RunStatus;
  input: string;
  options: RunOptions;
  output: string | null;
  error: string | null;
  usage: Record<string, unknown> | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

export interface RunEventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

export interface NewRun {
  sessionId?: string;
  input: string;
  options: RunOptions;
  idempotencyKey?: string;
  sessionMetadata?: Record<string, unknown>;
}

type RunRow = Prisma.RunGetPayload<object>;

/** Runs, their events and their tool calls, always within one tenant. */
@Injectable()
export class RunsRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * Creates the run (and its session when none was named) in one transaction. With an
   * idempotency key already used, returns that first run instead: `{created: false}`.
   */
  async create(tenantId: string, input: NewRun): Promise<{ run: RunView; created: boolean } | 'session_not_found'> {
    if (input.idempotencyKey) {
      const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
      if (existing) return { run: existing, created: false };
    }
    try {
      return await this.db.tenant(tenantId, async (tx) => {
        let sessionId = input.sessionId;
        if (sessionId) {
          const session = await tx.session.findFirst({ where: { id: sessionId, tenantId, status: 'active' }, select: { id: true } });
          if (!session) return 'session_not_found' as const;
        } else {
          sessionId = (
            await tx.session.create({
              data: { id: newId('ses'), tenantId, metadata: (input.sessionMetadata ?? {}) as Prisma.InputJsonValue },
              select: { id: true },
            })
          ).id;
        }
        const row = await tx.run.create({
          data: {
            id: newId('run'),
            tenantId,
            sessionId,
            status: 'queued',
            input: input.input,
            options: input.options as Prisma.InputJsonValue,
            idempotencyKey: input.idempotencyKey ?? null,
          },
        });
        return { run: toRun(row), created: true };
      });
    } catch (err) {
      // Two requests with one key raced: the loser returns the winner's run.
      if (input.idempotencyKey && err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') {
        const existing = await this.findByIdempotencyKey(tenantId, input.idempotencyKey);
        if (existing) return { run: existing, created: false };
      }
      throw err;
    }
  }

  async find(tenantId: string, id: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.run.findFirst({ where: { id, tenantId } }));
    return row ? toRun(row) : null;
  }

  async listForSession(tenantId: string, sessionId: string | undefined, limit: number): Promise<RunView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.run.findMany({
        where: { tenantId, ...(sessionId ? { sessionId } : {}) },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: limit,
      }),
    );
    return rows.map(toRun);
  }

  /** Moves a run from one of `from` to `to`; false when it was not in any of them. */
  async transition(tenantId: string, id: string, from: RunStatus[], to: RunStatus, extra: Partial<Pick<RunView, 'output' | 'error' | 'usage'>> = {}): Promise<boolean> {
    const now = new Date();
    const res = await this.db.tenant(tenantId, (tx) =>
      tx.run.updateMany({
        where: { id, tenantId, status: { in: from } },
        data: {
          status: to,
          ...(to === 'running' ? { startedAt: now } : {}),
          ...(TERMINAL_STATUSES.includes(to) ? { completedAt: now } : {}),
          ...(extra.output !== undefined ? { output: extra.output } : {}),
          ...(extra.error !== undefined ? { error: extra.error } : {}),
          ...(extra.usage !== undefined ? { usage: extra.usage as Prisma.InputJsonValue } : {}),
        },
      }),
    );
    return res.count > 0;
  }

  /** Stores the next event of the run; its seq is one more than the last. */
  async appendEvent(tenantId: string, runId: string, type: string, data: Record<string, unknown>): Promise<number> {
    return this.db.tenant(tenantId, async (tx) => {
      const last = await tx.runEvent.findFirst({ where: { runId }, orderBy: { seq: 'desc' }, select: { seq: true } });
      const seq = (last?.seq ?? 0) + 1;
      await tx.runEvent.create({ data: { tenantId, runId, seq, type, data: data as Prisma.InputJsonValue } });
      return seq;
    });
  }

  async eventsAfter(tenantId: string, runId: string, afterSeq: number, limit = 500): Promise<RunEventView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.runEvent.findMany({ where: { runId, tenantId, seq: { gt: afterSeq } }, orderBy: { seq: 'asc' }, take: limit }),
    );
    return rows.map((r) => ({ seq: r.seq, type: r.type, data: r.data as Record<string, unknown>, createdAt: r.createdAt }));
  }

  async recordToolCall(
    tenantId: string,
    call: { runId: string; sessionId: string; callId: string; name: string; arguments: unknown; status: string },
  ): Promise<string> {
    const id = newId('tc');
    await this.db.tenant(tenantId, (tx) =>
      tx.toolCall.upsert({
        where: { runId_callId: { runId: call.runId, callId: call.callId } },
        create: { id, tenantId, ...call, arguments: (call.arguments ?? {}) as Prisma.InputJsonValue },
        update: { status: call.status },
      }),
    );
    return id;
  }

  async finishToolCall(
    tenantId: string,
    runId: string,
    callId: string,
    result: { status: string; output: string; isError: boolean; metadata: Record<string, unknown> },
  ): Promise<void> {
    await this.db.tenant(tenantId, (tx) =>
      tx.toolCall.updateMany({
        where: { runId, callId, tenantId },
        data: { status: result.status, output: result.output, isError: result.isError, metadata: result.metadata as Prisma.InputJsonValue, completedAt: new Date() },
      }),
    );
  }

  private async findByIdempotencyKey(tenantId: string, key: string): Promise<RunView | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.run.findFirst({ where: { tenantId, idempotencyKey: key } }));
    return row ? toRun(row) : null;
  }
}

function toRun(row: RunRow): RunView {
  return {
    id: row.id,
    tenantId: row.tenantId,
    sessionId: row.sessionId,
    parentRunId: row.parentRunId,
    status: row.status as RunStatus,
    input: row.input,
    options: row.options as RunOptions,
    output: row.output,
    error: row.error,
    usage: (row.usage as Record<string, unknown> | null) ?? null,
    createdAt: row.createdAt,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
  };
}
