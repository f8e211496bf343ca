import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { MessageView } from '../sessions/sessions.repository';
import { RunView } from './runs.repository';

/** The conversation a run's model sees, and whether the run's last answer asked for tools. */
@Injectable()
export class RunMessagesRepository {
  constructor(private readonly db: PrismaService) {}

  /**
   * The conversation the model sees: a top-level run gets the session's whole history
   * (earlier runs included) without the private work of sub-runs; a sub-run sees only its
   * own messages, since a delegated task must stand alone.
   */
  async history(tenantId: string, run: Pick<RunView, 'id' | 'sessionId' | 'parentRunId'>): Promise<MessageView[]> {
    const rows = await this.db.tenant(tenantId, async (tx) => {
      if (run.parentRunId) return tx.message.findMany({ where: { tenantId, runId: run.id }, orderBy: { seq: 'asc' } });
      const children = await tx.run.findMany({ where: { tenantId, sessionId: run.sessionId, parentRunId: { not: null } }, select: { id: true } });
      const hidden = new Set(children.map((c) => c.id));
      const all = await tx.message.findMany({ where: { tenantId, sessionId: run.sessionId }, orderBy: { seq: 'asc' } });
      return all.filter((m) => !m.runId || !hidden.has(m.runId));
    });
    return rows.map((m) => ({
      id: m.id,
      runId: m.runId,
      role: m.role as MessageView['role'],
      content: m.content,
      toolCalls: (m.toolCalls as unknown as MessageView['toolCalls']) ?? null,
      toolCallId: m.toolCallId,
      createdAt: m.createdAt,
    }));
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
