import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolOutput } from '../tools/gateway-tool';
import { RagRepository } from './rag.repository';
import { RagSearchService } from './rag-search.service';

const parameters = z
  .object({
    query: z.string().min(1).max(2_000).describe('What to look for: words, identifiers or a question.'),
    limit: z.number().int().min(1).max(20).optional().describe('How many passages to return (default 5).'),
  })
  .strict();

type RagSearchArgs = z.infer<typeof parameters>;

/** rag_search: ranked passages from what rag_index added for this session. */
@Injectable()
export class RagSearchTool implements GatewayTool {
  readonly definition = {
    name: 'rag_search',
    description:
      'Search the documents indexed with rag_index in this session and get the best passages: path, line range and text. Good for questions about a large body of documentation or code ("where is the retry policy configured?"). Read more around a hit with read_file using its lines; for an exact string or regular expression use grep.',
    parameters,
    mutating: false,
    toolsets: ['research' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 60,
  };

  constructor(
    private readonly search: RagSearchService,
    private readonly rag: RagRepository,
  ) {}

  async execute(ctx: GatewayToolContext, args: RagSearchArgs): Promise<GatewayToolResult> {
    const { hits, degraded } = await this.search.search(ctx.tenantId, ctx.sessionId, args.query, args.limit ?? 5);
    const note = degraded ? `\n\n(Ranked by full text only: ${degraded}.)` : '';
    const results = hits.map((h) => ({ path: h.path, start_line: h.startLine, end_line: h.endLine, score: h.score, match: h.match }));
    if (!hits.length) {
      const { documents } = await this.rag.stats(ctx.tenantId, ctx.sessionId);
      const why = documents === 0 ? 'Nothing is indexed in this session yet: index files or folders with rag_index first.' : `Nothing in the ${documents} indexed files matches "${args.query}".`;
      return toolOutput(why + note, { count: 0, results, indexed_files: documents });
    }
    const blocks = hits.map((h, i) => `${i + 1}. ${h.path} lines ${h.startLine}-${h.endLine} (score ${h.score})\n${h.content}`);
    return toolOutput(`${hits.length} ${hits.length === 1 ? 'passage' : 'passages'} for "${args.query}", best first:\n\n${blocks.join('\n\n')}${note}`, {
      count: hits.length,
      results,
      embeddings: this.search.usesEmbeddings && !degraded,
    });
  }
}
