import { Injectable } from '@nestjs/common';
import { PrismaService, Tx } from '@app/persistence';
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
 * index); as the fallback, substring matches over user and assistant messages (served by a
 * partial trigram index), newest first.
 */
@Injectable()
export class HistoryRepository {
  constructor(private readonly db: PrismaService) {}

  async search(tenantId: string, query: TextQuery, limit: number, excludeRunId: string | null): Promise<HistoryHit[]> {
    return this.db.tenant(tenantId, async (tx) => {
      const hits: HistoryHit[] = [];
      if (query.anyTerms && query.allTerms) {
        // Messages with every word first, then with some: each query stays selective.
        hits.push(...(await this.ranked(tx, tenantId, query.allTerms, query.anyTerms, limit, excludeRunId, [])));
        if (hits.length < limit && query.terms.length > 1) {
          const found = hits.map((h) => h.messageId);
          hits.push(...(await this.ranked(tx, tenantId, query.anyTerms, query.anyTerms, limit - hits.length, excludeRunId, found)));
        }
      }
      if (hits.length < limit && query.text) {
        const found = hits.map((h) => h.messageId);
        const rows = await tx.$queryRaw<Array<HitRow & { content: string }>>`
          SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, left(m.content, ${SNIPPET_SOURCE_CHARS}) AS content, 1::float AS score
          FROM messages m
          JOIN sessions s ON s.id = m.session_id AND s.tenant_id = ${tenantId} AND s.status = 'active'
          WHERE m.tenant_id = ${tenantId} AND m.role IN ('user', 'assistant')
            AND m.content ILIKE ${query.likePattern}
            AND m.run_id IS DISTINCT FROM ${excludeRunId}
            AND NOT (m.id = ANY(${found}::text[]))
          ORDER BY m.created_at DESC
          LIMIT ${limit - hits.length}`;
        hits.push(...rows.map((r) => toHit(r, snippetAround(r.content, query.text), 'fuzzy')));
      }
      return hits;
    });
  }

  /** Messages matching `match`, best first, with a snippet highlighting `highlight`'s words. */
  private async ranked(tx: Tx, tenantId: string, match: string, highlight: string, limit: number, excludeRunId: string | null, exclude: string[]): Promise<HistoryHit[]> {
    // Rank and cut first, then build snippets for the few rows kept: ts_headline is costly.
    const rows = await tx.$queryRaw<Array<HitRow & { snippet: string }>>`
      WITH ranked AS (
        SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, m.content,
               ts_rank(to_tsvector('english', COALESCE(m.content, '')), q) AS score
        FROM messages m
        JOIN sessions s ON s.id = m.session_id AND s.tenant_id = ${tenantId} AND s.status = 'active',
             to_tsquery('english', ${match}) AS q
        WHERE m.tenant_id = ${tenantId}
          AND to_tsvector('english', COALESCE(m.content, '')) @@ q
          AND m.run_id IS DISTINCT FROM ${excludeRunId}
          AND NOT (m.id = ANY(${exclude}::text[]))
        ORDER BY score DESC, m.created_at DESC
        LIMIT ${limit}
      )
      SELECT r.id, r.session_id, r.run_id, r.role, r.created_at, r.score,
             ts_headline('english', left(r.content, ${SNIPPET_SOURCE_CHARS}), to_tsquery('english', ${highlight}), ${HEADLINE_OPTIONS}) AS snippet
      FROM ranked r
      ORDER BY r.score DESC, r.created_at DESC`;
    return rows.map((r) => toHit(r, r.snippet.replace(/\s+/g, ' ').trim(), 'text'));
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
