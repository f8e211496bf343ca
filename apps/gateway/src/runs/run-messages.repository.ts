import { Injectable } from '@nestjs/common';
import { PrismaService, SqlTx } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { MessageView } from '../sessions/sessions.repository';
import { shortenedToolResult, toolResultAllowance } from './context-budget';
import { RunView } from './runs.repository';

interface ContextRow {
  id: string;
  run_id: string | null;
  role: string;
  tool_calls: Prisma.JsonValue;
  tool_call_id: string | null;
  created_at: Date;
  /** Length of the stored content (0 for none). */
  chars: number;
  /** The content, except a tool result's, which is read separately as far as the budget allows. */
  content: string | null;
}

/** The conversation a run's model sees, and whether the run's last answer asked for tools. */
@Injectable()
export class RunMessagesRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * The conversation the model sees: a top-level run gets the session's whole history
   * (earlier runs included) without the private work of sub-runs; a sub-run sees only its
   * own messages, since a delegated task must stand alone. Tool results are read only as
   * far as the budget lets them be sent (context-budget.ts), so neither the request nor the
   * gateway's memory grows with the size of stored results.
   */
  async modelContext(tenantId: string, run: Pick<RunView, 'id' | 'sessionId' | 'parentRunId'>, budgetChars: number): Promise<MessageView[]> {
    return this.db.tenantSql(tenantId, (sql) => readModelContext(sql, tenantId, run, budgetChars));
  }

  /** The run's last assistant message, if it has one. */
  async lastAnswer(tenantId: string, runId: string): Promise<{ content: string | null; hasToolCalls: boolean } | null> {
    const row = await this.db.tenant(tenantId, (tx) =>
      tx.message.findFirst({ where: { tenantId, runId, role: 'assistant' }, orderBy: { seq: 'desc' }, select: { content: true, toolCalls: true } }),
    );
    if (!row) return null;
    return { content: row.content, hasToolCalls: Array.isArray(row.toolCalls) && row.toolCalls.length > 0 };
  }
}

/** RunMessagesRepository.modelContext within a transaction of the tenant that is open already. */
export async function readModelContext(sql: SqlTx, tenantId: string, run: Pick<RunView, 'id' | 'sessionId' | 'parentRunId'>, budgetChars: number): Promise<MessageView[]> {
  const scope = run.parentRunId
    ? Prisma.sql`m.run_id = ${run.id}`
    : Prisma.sql`m.session_id = ${run.sessionId} AND (m.run_id IS NULL OR m.run_id NOT IN (
        SELECT id FROM runs WHERE tenant_id = ${tenantId} AND session_id = ${run.sessionId} AND parent_run_id IS NOT NULL))`;
  // First the messages without their tool results' text, then each result's allowed head.
  const rows = await sql.query<ContextRow>(Prisma.sql`
    SELECT m.id, m.run_id, m.role, m.tool_calls, m.tool_call_id, m.created_at,
           coalesce(char_length(m.content), 0)::int AS chars,
           CASE WHEN m.role = 'tool' THEN NULL ELSE m.content END AS content
      FROM messages m WHERE m.tenant_id = ${tenantId} AND ${scope} ORDER BY m.seq ASC`);
  const allowances = new Map<string, number>();
  let newerChars = 0;
  for (const row of [...rows].reverse()) {
    if (row.role !== 'tool') continue;
    allowances.set(row.id, toolResultAllowance(budgetChars, newerChars));
    newerChars += row.chars;
  }
  const heads = new Map<string, string | null>();
  if (allowances.size > 0) {
    const found = await sql.query<{ id: string; head: string | null }>(Prisma.sql`
      SELECT m.id, left(m.content, a.allowance) AS head
        FROM messages m JOIN unnest(${[...allowances.keys()]}::text[], ${[...allowances.values()]}::int[]) AS a(id, allowance) ON a.id = m.id
       WHERE m.tenant_id = ${tenantId}`);
    for (const { id, head } of found) heads.set(id, head);
  }
  return rows.map((m) => {
    const head = heads.get(m.id);
    return {
      id: m.id,
      runId: m.run_id,
      role: m.role as MessageView['role'],
      content: m.role !== 'tool' ? m.content : head == null ? null : shortenedToolResult(head, m.chars),
      toolCalls: (m.tool_calls as unknown as MessageView['toolCalls']) ?? null,
      toolCallId: m.tool_call_id,
      createdAt: m.created_at,
    };
  });
}
