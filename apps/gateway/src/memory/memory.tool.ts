import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { MemoryHit, MemoryView, MemoryVisibility } from './memory.repository';
import { memoryContentSchema } from './memory.schemas';
import { MemoryService } from './memory.service';

const SEARCH_LIMIT = 10;
const LIST_LIMIT = 50;

const parameters = z
  .object({
    action: z.enum(['save', 'search', 'list', 'delete']),
    content: memoryContentSchema.optional().describe('save: the fact, written so it stands on its own later.'),
    query: z.string().min(1).max(1_000).optional().describe('search: words to look for.'),
    id: z.string().min(1).max(64).optional().describe('delete: the memory id (mem_…) that search or list showed.'),
  })
  .strict()
  .superRefine((a, ctx) => {
    const needs = { save: 'content', search: 'query', delete: 'id', list: null }[a.action];
    if (needs && a[needs as 'content' | 'query' | 'id'] === undefined) {
      ctx.addIssue({ code: 'custom', path: [needs], message: `${a.action} needs ${needs}` });
    }
  });

type MemoryArgs = z.infer<typeof parameters>;

/** The memory tool: durable facts for the tenant, seen from every session (narrowed by the run's memory_scope). */
@Injectable()
export class MemoryTool implements GatewayTool {
  readonly definition = {
    name: 'memory',
    description:
      'Durable memory shared by every session of this tenant. save a fact worth knowing next time (a preference, a decision, where something lives), search before asking the user something they may have told you already, list what is stored, delete a fact that is wrong or outdated (by its mem_ id). One self-contained fact per save. For what was said in past conversations use session_search; for documents use rag_search.',
    parameters,
    mutating: true,
    mutatingCall: (args: Record<string, unknown>) => args.action === 'save' || args.action === 'delete',
    toolsets: ['research' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 30,
  };

  constructor(private readonly memory: MemoryService) {}

  async execute(ctx: GatewayToolContext, args: MemoryArgs): Promise<GatewayToolResult> {
    const scope = ctx.memoryScope ?? null;
    const visibility: MemoryVisibility = { kind: 'scope', scope };
    switch (args.action) {
      case 'save': {
        const { memory, created } = await this.memory.save(ctx.tenantId, args.content!, scope, ctx.runId);
        const where = scope ? ` in scope ${scope}` : '';
        return toolOutput(created ? `Saved memory ${memory.id}${where}.` : `Already remembered as ${memory.id}${where}; nothing new saved.`, {
          id: memory.id,
          scope,
          created,
        });
      }
      case 'search': {
        const hits = (await this.memory.find(ctx.tenantId, visibility, args.query, SEARCH_LIMIT)) as MemoryHit[];
        if (!hits.length) return toolOutput(`No memories match "${args.query}".`, { count: 0, results: [] });
        return toolOutput(`${hits.length} ${plural(hits.length, 'memory', 'memories')} match "${args.query}", best first:\n${hits.map(line).join('\n')}`, {
          count: hits.length,
          results: hits.map((h) => ({ id: h.id, score: h.score, match: h.match })),
        });
      }
      case 'list': {
        const all = await this.memory.find(ctx.tenantId, visibility, undefined, LIST_LIMIT + 1);
        const shown = all.slice(0, LIST_LIMIT);
        if (!shown.length) return toolOutput('No memories are stored yet.', { count: 0 });
        const more = all.length > LIST_LIMIT ? `\n… more are stored; use search to find older ones.` : '';
        return toolOutput(`${shown.length} ${plural(shown.length, 'memory', 'memories')}, newest first:\n${shown.map(line).join('\n')}${more}`, {
          count: shown.length,
        });
      }
      case 'delete': {
        const deleted = await this.memory.delete(ctx.tenantId, visibility, args.id!);
        if (!deleted) return toolFailure(`No memory ${args.id} exists here (already deleted, or never saved); use list or search to see the ids.`, { id: args.id });
        return toolOutput(`Deleted memory ${args.id}.`, { id: args.id });
      }
    }
  }
}

function line(m: MemoryView): string {
  const scope = m.scope ? `, scope ${m.scope}` : '';
  return `- [${m.id}] ${m.content.replace(/\s*\n\s*/g, ' ')} (saved ${m.createdAt.toISOString().slice(0, 10)}${scope})`;
}

function plural(n: number, one: string, many: string): string {
  return n === 1 ? one : many;
}
