import { Injectable } from '@nestjs/common';
import { newId, PrismaService, Tx } from '@app/persistence';
import { Prisma } from '@prisma/client';

export interface SessionView {
  id: string;
  status: string;
  metadata: Record<string, unknown>;
  createdAt: Date;
  sandboxState: string;
  executorId: string | null;
}

export interface ChatToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface MessageView {
  id: string;
  runId: string | null;
  role: 'user' | 'assistant' | 'tool' | 'system';
  content: string | null;
  toolCalls: ChatToolCall[] | null;
  toolCallId: string | null;
  createdAt: Date;
}

export interface NewMessage {
  runId?: string | null;
  role: MessageView['role'];
  content: string | null;
  toolCalls?: ChatToolCall[] | null;
  toolCallId?: string | null;
}

/** Sessions and their message history, always within one tenant. */
@Injectable()
export class SessionsRepository {
  constructor(private readonly db: PrismaService) {}

  async create(tenantId: string, metadata: Record<string, unknown>): Promise<SessionView> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.session.create({ data: { id: newId('ses'), tenantId, metadata: metadata as Prisma.InputJsonValue } }),
    );
    return toSession({ ...row, sandbox: null });
  }

  async createIn(tx: Tx, tenantId: string, metadata: Record<string, unknown>): Promise<string> {
    const row = await tx.session.create({
      data: { id: newId('ses'), tenantId, metadata: metadata as Prisma.InputJsonValue },
      select: { id: true },
    });
    return row.id;
  }

  /** A live session of the tenant, or null (missing, deleted, or another tenant's). */
  async find(tenantId: string, id: string): Promise<SessionView | null> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.session.findFirst({ where: { id, tenantId, status: 'active' }, include: { sandbox: true } }),
    );
    return row ? toSession(row) : null;
  }

  /**
   * Where a live session's tool calls go: its executor, or null before it has a sandbox.
   * Null when the session is missing, deleted or another tenant's. One joined query instead
   * of find()'s two, sent as one round trip (`tenantRead`) rather than an interactive
   * transaction's four, because every direct tool call the route cache has not seen lately
   * pays for it: most of them once sessions are many (docs/sandbox.md, Density).
   */
  async toolRoute(tenantId: string, id: string): Promise<{ executorId: string | null } | null> {
    const rows = await this.db.tenantRead<{ executor_id: string | null }>(
      tenantId,
      Prisma.sql`
        SELECT CASE WHEN sb.state <> 'removed' THEN sb.executor_id END AS executor_id
        FROM sessions s LEFT JOIN sandboxes sb ON sb.session_id = s.id
        WHERE s.id = ${id} AND s.tenant_id = ${tenantId} AND s.status = 'active'`,
    );
    return rows.length ? { executorId: rows[0].executor_id } : null;
  }

  /**
   * Live sessions of the tenant, newest first, at most `limit`, starting after `after` (the
   * last session of the previous page, by creation time then id, which never ties).
   */
  async list(tenantId: string, limit: number, after?: { createdAt: Date; id: string }): Promise<SessionView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.session.findMany({
        where: {
          tenantId,
          status: 'active',
          ...(after ? { OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { lt: after.id } }] } : {}),
        },
        include: { sandbox: true },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: limit,
      }),
    );
    return rows.map(toSession);
  }

  async markDeleted(tenantId: string, id: string): Promise<boolean> {
    const res = await this.db.tenant(tenantId, (tx) =>
      tx.session.updateMany({ where: { id, tenantId, status: 'active' }, data: { status: 'deleted', deletedAt: new Date() } }),
    );
    return res.count > 0;
  }

  /**
   * The session's conversation, oldest first. Sub-runs' messages (delegate_task's private
   * work) are left out unless asked for, as they are from the history the model reads.
   */
  async listMessages(tenantId: string, sessionId: string, options: { includeSubRuns?: boolean } = {}): Promise<MessageView[]> {
    const rows = await this.db.tenant(tenantId, async (tx) => {
      if (options.includeSubRuns) return tx.message.findMany({ where: { tenantId, sessionId }, orderBy: { seq: 'asc' } });
      const subRuns = await tx.run.findMany({ where: { tenantId, sessionId, parentRunId: { not: null } }, select: { id: true } });
      const hidden = subRuns.map((r) => r.id);
      return tx.message.findMany({
        where: { tenantId, sessionId, ...(hidden.length > 0 ? { OR: [{ runId: null }, { runId: { notIn: hidden } }] } : {}) },
        orderBy: { seq: 'asc' },
      });
    });
    return rows.map(toMessage);
  }

  async appendMessages(tenantId: string, sessionId: string, messages: NewMessage[], tx?: Tx): Promise<void> {
    const write = (t: Tx) =>
      t.message.createMany({
        data: messages.map((m) => ({
          id: newId('msg'),
          tenantId,
          sessionId,
          runId: m.runId ?? null,
          role: m.role,
          content: m.content,
          toolCalls: m.toolCalls ? (m.toolCalls as unknown as Prisma.InputJsonValue) : Prisma.JsonNull,
          toolCallId: m.toolCallId ?? null,
        })),
      });
    if (tx) await write(tx);
    else await this.db.tenant(tenantId, write);
  }
}

function toSession(row: {
  id: string;
  status: string;
  metadata: Prisma.JsonValue;
  createdAt: Date;
  sandbox: { state: string; executorId: string } | null;
}): SessionView {
  return {
    id: row.id,
    status: row.status,
    metadata: (row.metadata ?? {}) as Record<string, unknown>,
    createdAt: row.createdAt,
    sandboxState: row.sandbox?.state ?? 'none',
    executorId: row.sandbox && row.sandbox.state !== 'removed' ? row.sandbox.executorId : null,
  };
}

function toMessage(row: {
  id: string;
  runId: string | null;
  role: string;
  content: string | null;
  toolCalls: Prisma.JsonValue;
  toolCallId: string | null;
  createdAt: Date;
}): MessageView {
  return {
    id: row.id,
    runId: row.runId,
    role: row.role as MessageView['role'],
    content: row.content,
    toolCalls: (row.toolCalls as unknown as ChatToolCall[] | null) ?? null,
    toolCallId: row.toolCallId,
    createdAt: row.createdAt,
  };
}
