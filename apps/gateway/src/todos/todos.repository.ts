import { Injectable } from '@nestjs/common';
import { PrismaService, Tx } from '@app/persistence';

export const TODO_STATUSES = ['pending', 'in_progress', 'completed', 'cancelled'] as const;
export type TodoStatus = (typeof TODO_STATUSES)[number];

export interface TodoView {
  id: number;
  content: string;
  status: TodoStatus;
  createdAt: Date;
  updatedAt: Date;
}

/** A session's task list holds at most this many items. */
export const MAX_TODOS = 100;

/**
 * Removed items stay as tombstones with this status, hidden from every list, so a number
 * is never handed out twice in a session: a model that remembers "task 2" cannot be
 * pointed at a different task.
 */
const REMOVED = 'removed';

export class TodoLimitError extends Error {}

/**
 * Session task lists, always within one tenant. Writers of one session take turns (a row
 * lock on the session), so parallel tool calls in one turn never hand out the same number.
 */
@Injectable()
export class TodosRepository {
  constructor(private readonly db: PrismaService) {}

  list(tenantId: string, sessionId: string): Promise<TodoView[]> {
    return this.db.tenant(tenantId, (tx) => listIn(tx, tenantId, sessionId));
  }

  /** Appends items numbered after the highest number the session used; returns the whole list. */
  add(tenantId: string, sessionId: string, items: Array<{ content: string; status: TodoStatus }>): Promise<TodoView[]> {
    return this.db.tenant(tenantId, async (tx) => {
      await lockSession(tx, tenantId, sessionId);
      const existing = await tx.todo.count({ where: { tenantId, sessionId, status: { not: REMOVED } } });
      if (existing + items.length > MAX_TODOS) {
        throw new TodoLimitError(`a session's todo list holds at most ${MAX_TODOS} items (it has ${existing}); remove finished ones first`);
      }
      const top = await tx.todo.aggregate({ where: { sessionId }, _max: { number: true } });
      const first = (top._max.number ?? 0) + 1;
      await tx.todo.createMany({ data: items.map((item, i) => ({ tenantId, sessionId, number: first + i, content: item.content, status: item.status })) });
      return listIn(tx, tenantId, sessionId);
    });
  }

  /** Null when the session has no such item. */
  update(tenantId: string, sessionId: string, id: number, status: TodoStatus): Promise<TodoView[] | null> {
    return this.db.tenant(tenantId, async (tx) => {
      await lockSession(tx, tenantId, sessionId);
      const res = await tx.todo.updateMany({ where: { tenantId, sessionId, number: id, status: { not: REMOVED } }, data: { status } });
      return res.count ? listIn(tx, tenantId, sessionId) : null;
    });
  }

  remove(tenantId: string, sessionId: string, id: number): Promise<TodoView[] | null> {
    return this.db.tenant(tenantId, async (tx) => {
      await lockSession(tx, tenantId, sessionId);
      const res = await tx.todo.updateMany({ where: { tenantId, sessionId, number: id, status: { not: REMOVED } }, data: { status: REMOVED } });
      return res.count ? listIn(tx, tenantId, sessionId) : null;
    });
  }
}

async function lockSession(tx: Tx, tenantId: string, sessionId: string): Promise<void> {
  await tx.$queryRaw`SELECT id FROM sessions WHERE id = ${sessionId} AND tenant_id = ${tenantId} FOR UPDATE`;
}

async function listIn(tx: Tx, tenantId: string, sessionId: string): Promise<TodoView[]> {
  const rows = await tx.todo.findMany({ where: { tenantId, sessionId, status: { not: REMOVED } }, orderBy: { number: 'asc' } });
  return rows.map((r) => ({ id: r.number, content: r.content, status: r.status as TodoStatus, createdAt: r.createdAt, updatedAt: r.updatedAt }));
}
