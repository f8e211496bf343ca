import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { parseTextQuery } from '../search/text-query';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolOutput } from '../tools/gateway-tool';
import { HistoryHit, HistoryRepository } from './history.repository';

const parameters = z
  .object({
    query: z.string().min(1).max(1_000).describe('Words or a phrase to look for in past conversations.'),
    limit: z.number().int().min(1).max(50).optional().describe('How many messages to return (default 10).'),
  })
  .strict();

type SessionSearchArgs = z.infer<typeof parameters>;

/** session_search: full text over every past conversation of the tenant. */
@Injectable()
export class SessionSearchTool implements GatewayTool {
  readonly definition = {
    name: 'session_search',
    description:
      'Search every past conversation of this tenant (all sessions: user requests, answers and tool results) for words or a phrase. Returns the session id, run id, role, time and a snippet with the match in **bold**, best match first. Use it when the user refers to earlier work ("like we did last week"). For facts deliberately saved use memory; for documents use rag_search.',
    parameters,
    mutating: false,
    toolsets: ['research' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 30,
  };

  constructor(private readonly history: HistoryRepository) {}

  async execute(ctx: GatewayToolContext, args: SessionSearchArgs): Promise<GatewayToolResult> {
    const hits = await this.history.search(ctx.tenantId, parseTextQuery(args.query), args.limit ?? 10, ctx.runId ?? null);
    const results = hits.map((h) => ({
      session_id: h.sessionId,
      run_id: h.runId,
      message_id: h.messageId,
      role: h.role,
      created_at: h.createdAt.toISOString(),
      score: h.score,
    }));
    if (!hits.length) return toolOutput(`No past messages match "${args.query}".`, { count: 0, results });
    return toolOutput(`${hits.length} past ${hits.length === 1 ? 'message matches' : 'messages match'} "${args.query}", best first:\n\n${hits.map(block).join('\n\n')}`, {
      count: hits.length,
      results,
    });
  }
}

function block(h: HistoryHit, i: number): string {
  const current = h.runId ? ` · run ${h.runId}` : '';
  return `${i + 1}. session ${h.sessionId}${current} · ${h.role} · ${h.createdAt.toISOString()}\n   ${h.snippet}`;
}
