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
        hits.push(...(await this.ranked(tx, query.allTerms, query.anyTerms, limit, excludeRunId, [])));
        if (hits.length < limit && query.terms.length > 1) {
          const found = hits.map((h) => h.messageId);
          hits.push(...(await this.ranked(tx, query.anyTerms, query.anyTerms, limit - hits.length, excludeRunId, found)));
        }
      }
      if (hits.length < limit && query.text) {
        const found = hits.map((h) => h.messageId);
        const rows = await tx.$queryRaw<Array<HitRow & { content: string }>>`
          SELECT id, session_id, run_id, role, created_at, left(content, ${SNIPPET_SOURCE_CHARS}) AS content, 1::float AS score
          FROM search_messages_substring(${query.likePattern}, ${excludeRunId}::text, ${found}::text[], ${limit - hits.length}::int)`;
        hits.push(...rows.map((r) => toHit(r, snippetAround(r.content, query.text), 'fuzzy')));
      }
      return hits;
    });
  }

  /**
   * Messages matching `match`, best first, with a snippet highlighting `highlight`'s words.
   * The database's search function ranks and cuts (filtering by the transaction's tenant
   * itself, so the index answers under row-level security); snippets are built here for the
   * few rows kept, since ts_headline is costly.
   */
  private async ranked(tx: Tx, match: string, highlight: string, limit: number, excludeRunId: string | null, exclude: string[]): Promise<HistoryHit[]> {
    const rows = await tx.$queryRaw<Array<HitRow & { snippet: string }>>`
      SELECT r.id, r.session_id, r.run_id, r.role, r.created_at, r.score,
             ts_headline('english', left(r.content, ${SNIPPET_SOURCE_CHARS}), to_tsquery('english', ${highlight}), ${HEADLINE_OPTIONS}) AS snippet
      FROM search_messages(${match}, ${excludeRunId}::text, ${exclude}::text[], ${limit}::int) AS r
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
