import { Inject, Injectable, Optional } from '@nestjs/common';
import { EMBEDDINGS_PROVIDER, EmbeddingsError, EmbeddingsProvider } from '../embeddings/embeddings.provider';
import { parseTextQuery } from '../search/text-query';
import { ChunkHit, RagRepository } from './rag.repository';

/** Candidates each ranking contributes before fusion. */
const FUSION_CANDIDATES = 40;
/** Reciprocal rank fusion's damping constant (Cormack et al. 2009): 60 is the usual choice. */
const RRF_K = 60;

/**
 * rag_search's ranking. Full text (with the substring/trigram fallback) always; with an
 * embeddings provider, also vector similarity, the two lists merged by reciprocal rank
 * fusion so neither score scale has to be calibrated against the other.
 */
@Injectable()
export class RagSearchService {
  constructor(
    private readonly rag: RagRepository,
    @Optional() @Inject(EMBEDDINGS_PROVIDER) private readonly embeddings: EmbeddingsProvider | null = null,
  ) {}

  get usesEmbeddings(): boolean {
    return this.embeddings !== null;
  }

  /** `degraded` names why vector ranking was left out (the provider failed): the hits are full text only. */
  async search(tenantId: string, sessionId: string, query: string, limit: number): Promise<{ hits: ChunkHit[]; degraded?: string }> {
    const parsed = parseTextQuery(query, { splitIdentifiers: true });
    // Ask for more than needed: overlapping chunks of one file are merged below.
    const wanted = this.embeddings ? FUSION_CANDIDATES : limit * 2;
    const text = await this.rag.searchText(tenantId, sessionId, parsed, wanted);
    if (text.length < wanted) {
      text.push(...(await this.rag.searchFuzzy(tenantId, sessionId, parsed, wanted - text.length, text.map((h) => h.id))));
    }
    if (!this.embeddings) return { hits: withoutOverlaps(text, limit) };
    let vector: number[];
    try {
      [vector] = await this.embeddings.embed([query]);
    } catch (err) {
      if (!(err instanceof EmbeddingsError)) throw err;
      return { hits: withoutOverlaps(text, limit), degraded: err.message };
    }
    const nearest = await this.rag.searchVector(tenantId, sessionId, vector, FUSION_CANDIDATES);
    return { hits: withoutOverlaps(fuse([text, nearest]), limit) };
  }
}

/** Reciprocal rank fusion: each list adds 1/(k + rank) to an item's score. */
export function fuse(lists: ChunkHit[][]): ChunkHit[] {
  const scored = new Map<string, { hit: ChunkHit; score: number }>();
  for (const list of lists) {
    list.forEach((hit, rank) => {
      const entry = scored.get(hit.id) ?? { hit, score: 0 };
      entry.score += 1 / (RRF_K + rank + 1);
      scored.set(hit.id, entry);
    });
  }
  return [...scored.values()]
    .sort((a, b) => b.score - a.score)
    .map(({ hit, score }) => ({ ...hit, score: Math.round(score * 10_000) / 10_000 }));
}

/**
 * Drops a hit when most of its lines are already in a better hit of the same file: adjacent
 * chunks share their overlap lines, and showing the same passage twice wastes the budget.
 */
export function withoutOverlaps(hits: ChunkHit[], limit: number): ChunkHit[] {
  const kept: ChunkHit[] = [];
  for (const hit of hits) {
    const lines = hit.endLine - hit.startLine + 1;
    const shared = (k: ChunkHit) => Math.min(k.endLine, hit.endLine) - Math.max(k.startLine, hit.startLine) + 1;
    if (!kept.some((k) => k.path === hit.path && shared(k) * 2 > lines)) kept.push(hit);
    if (kept.length === limit) break;
  }
  return kept;
}
