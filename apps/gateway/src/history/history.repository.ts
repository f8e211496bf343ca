import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { TextQuery, snippetAround } from '../search/text-query';

export interface HistoryHit {
  messageId: string;
  sessionId: string;
  runId: string | null;
  role: string;
  createdAt: Date;
  snippet: string;
  match: 'text' | 'fuzzy';
  score: number;
}

/** Only this much of a message feeds its snippet; tool outputs can be very long. */
const SNIPPET_SOURCE_CHARS = 20_000;
const HEADLINE_OPTIONS = 'StartSel=**, StopSel=**, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "';

interface HitRow {
  id: string;
  session_id: string;
  run_id: string | null;
  role: string;
  created_at: Date;
  score: number;
}

/**
 * Search over the messages of the tenant's live sessions (deleted sessions are gone from
 * search as they are from the API). Full text over every message ('english' expression
 * index); substring and trigram matches over user and assistant messages as the fallback.
 */
@Injectable()
export class HistoryRepository {
  constructor(private readonly db: PrismaService) {}

  async search(tenantId: string, query: TextQuery, limit: number, excludeRunId: string | null): Promise<HistoryHit[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const hits: HistoryHit[] = [];
      if (query.anyTerms) {
        // Rank and cut first, then build snippets for the few rows kept: ts_headline is costly.
        const rows = await tx.$queryRaw<Array<HitRow & { snippet: string }>>`
          WITH q AS (SELECT to_tsquery('english', ${query.anyTerms}) AS any_q, to_tsquery('english', ${query.allTerms}) AS all_q),
          ranked AS (
            SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, m.content,
                   ts_rank(to_tsvector('english', COALESCE(m.content, '')), q.any_q) AS score,
                   to_tsvector('english', COALESCE(m.content, '')) @@ q.all_q AS all_match
            FROM messages m
            JOIN sessions s ON s.id = m.session_id AND s.tenant_id = ${tenantId} AND s.status = 'active'
            CROSS JOIN q
            WHERE m.tenant_id = ${tenantId}
              AND to_tsvector('english', COALESCE(m.content, '')) @@ q.any_q
              AND m.run_id IS DISTINCT FROM ${excludeRunId}
            ORDER BY all_match DESC, score DESC, m.created_at DESC
            LIMIT ${limit}
          )
          SELECT r.id, r.session_id, r.run_id, r.role, r.created_at, r.score,
                 ts_headline('english', left(r.content, ${SNIPPET_SOURCE_CHARS}), q.any_q, ${HEADLINE_OPTIONS}) AS snippet
          FROM ranked r CROSS JOIN q
          ORDER BY r.all_match DESC, r.score DESC, r.created_at DESC`;
        hits.push(...rows.map((r) => toHit(r, r.snippet.replace(/\s+/g, ' ').trim(), 'text')));
      }
      if (hits.length < limit && query.text) {
        const found = hits.map((h) => h.messageId);
        const rows = await tx.$queryRaw<Array<HitRow & { content: string }>>`
          SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, left(m.content, ${SNIPPET_SOURCE_CHARS}) AS content,
                 GREATEST(word_similarity(${query.text}, m.content), CASE WHEN m.content ILIKE ${query.likePattern} THEN 1 ELSE 0 END) AS score
          FROM messages m
          JOIN sessions s ON s.id = m.session_id AND s.tenant_id = ${tenantId} AND s.status = 'active'
          WHERE m.tenant_id = ${tenantId} AND m.role IN ('user', 'assistant')
            AND (m.content ILIKE ${query.likePattern} OR ${query.text} <% m.content)
            AND m.run_id IS DISTINCT FROM ${excludeRunId}
            AND NOT (m.id = ANY(${found}::text[]))
          ORDER BY score DESC, m.created_at DESC
          LIMIT ${limit - hits.length}`;
        hits.push(...rows.map((r) => toHit(r, snippetAround(r.content, query.text), 'fuzzy')));
      }
      return hits;
    });
  }
}

function toHit(r: HitRow, snippet: string, match: 'text' | 'fuzzy'): HistoryHit {
  return {
    messageId: r.id,
    sessionId: r.session_id,
    runId: r.run_id,
    role: r.role,
    createdAt: r.created_at,
    snippet,
    match,
    score: Math.round(Number(r.score) * 10_000) / 10_000,
  };
}
