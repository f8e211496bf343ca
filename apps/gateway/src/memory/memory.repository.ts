import { Injectable } from '@nestjs/common';
import { newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { TextQuery } from '../search/text-query';

export interface MemoryView {
  id: string;
  scope: string | null;
  content: string;
  runId: string | null;
  createdAt: Date;
}

export interface MemoryHit extends MemoryView {
  /** `text`: a full-text match (ts_rank); `fuzzy`: substring or trigram similarity. */
  match: 'text' | 'fuzzy';
  score: number;
}

/**
 * Which memories a caller sees: `all` (the tenant's management view over HTTP), or what a run
 * with that scope sees: the shared facts (scope null) plus its own scope's.
 */
export type MemoryVisibility = { kind: 'all' } | { kind: 'scope'; scope: string | null };

interface MemoryRow {
  id: string;
  scope: string | null;
  content: string;
  run_id: string | null;
  created_at: Date;
}

/** Durable facts, always within one tenant. */
@Injectable()
export class MemoryRepository {
  constructor(private readonly db: PrismaService) {}

  /** Saves a fact; the same content in the same scope is kept once: `created` says which happened. */
  async save(tenantId: string, input: { content: string; scope: string | null; runId?: string | null }): Promise<{ memory: MemoryView; created: boolean }> {
    return this.db.tenant(tenantId, async (tx) => {
      const inserted = await tx.$queryRaw<MemoryRow[]>`
        INSERT INTO memories (id, tenant_id, scope, content, run_id)
        VALUES (${newId('mem')}, ${tenantId}, ${input.scope}, ${input.content}, ${input.runId ?? null})
        ON CONFLICT (tenant_id, COALESCE(scope, ''), md5(content)) DO NOTHING
        RETURNING id, scope, content, run_id, created_at`;
      if (inserted.length) return { memory: toView(inserted[0]), created: true };
      const existing = await tx.$queryRaw<MemoryRow[]>`
        SELECT id, scope, content, run_id, created_at FROM memories
        WHERE tenant_id = ${tenantId} AND COALESCE(scope, '') = ${input.scope ?? ''} AND md5(content) = md5(${input.content})`;
      return { memory: toView(existing[0]), created: false };
    });
  }

  /** Newest first. */
  async list(tenantId: string, visibility: MemoryVisibility, limit: number): Promise<MemoryView[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<MemoryRow[]>`
        SELECT id, scope, content, run_id, created_at FROM memories
        WHERE tenant_id = ${tenantId} AND ${visible(visibility)}
        ORDER BY created_at DESC, id LIMIT ${limit}`,
    );
    return rows.map(toView);
  }

  /**
   * Full-text matches first (rows holding every query word, then by ts_rank); when they are
   * fewer than `limit`, substring and trigram matches fill the rest. Both run in the database's
   * search functions, which filter by the transaction's tenant themselves, so the indexes
   * answer under row-level security (docs/memory-and-retrieval.md#search-at-scale).
   */
  async search(tenantId: string, visibility: MemoryVisibility, query: TextQuery, limit: number): Promise<MemoryHit[]> {
    const { scope, anyScope } = scopeFilter(visibility);
    return this.db.tenant(tenantId, async (tx) => {
      const hits: MemoryHit[] = [];
      if (query.anyTerms) {
        const rows = await tx.$queryRaw<Array<MemoryRow & { rank: number }>>`
          SELECT id, scope, content, run_id, created_at, rank
          FROM search_memories(${query.anyTerms}, ${query.allTerms}, ${scope}::text, ${anyScope}, ${limit}::int)`;
        hits.push(...rows.map((r) => ({ ...toView(r), match: 'text' as const, score: round(r.rank) })));
      }
      if (hits.length < limit && query.text) {
        const found = hits.map((h) => h.id);
        const rows = await tx.$queryRaw<Array<MemoryRow & { similarity: number }>>`
          SELECT id, scope, content, run_id, created_at, similarity
          FROM search_memories_fuzzy(${query.text}, ${query.likePattern}, ${scope}::text, ${anyScope}, ${found}::text[], ${limit - hits.length}::int)`;
        hits.push(...rows.map((r) => ({ ...toView(r), match: 'fuzzy' as const, score: round(r.similarity) })));
      }
      return hits;
    });
  }

  async find(tenantId: string, visibility: MemoryVisibility, id: string): Promise<MemoryView | null> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<MemoryRow[]>`
        SELECT id, scope, content, run_id, created_at FROM memories
        WHERE tenant_id = ${tenantId} AND id = ${id} AND ${visible(visibility)}`,
    );
    return rows.length ? toView(rows[0]) : null;
  }

  /** False when no such memory is visible (missing, another scope's, another tenant's). */
  async delete(tenantId: string, visibility: MemoryVisibility, id: string): Promise<boolean> {
    const count = await this.db.tenant(tenantId, (tx) =>
      tx.$executeRaw`DELETE FROM memories WHERE tenant_id = ${tenantId} AND id = ${id} AND ${visible(visibility)}`,
    );
    return count > 0;
  }
}

function visible(v: MemoryVisibility): Prisma.Sql {
  if (v.kind === 'all') return Prisma.sql`TRUE`;
  if (v.scope === null) return Prisma.sql`scope IS NULL`;
  return Prisma.sql`(scope IS NULL OR scope = ${v.scope})`;
}

/** `visible` as the search functions take it: every scope, or the shared facts plus `scope`'s. */
function scopeFilter(v: MemoryVisibility): { scope: string | null; anyScope: boolean } {
  return v.kind === 'all' ? { scope: null, anyScope: true } : { scope: v.scope, anyScope: false };
}

function toView(r: MemoryRow): MemoryView {
  return { id: r.id, scope: r.scope, content: r.content, runId: r.run_id, createdAt: r.created_at };
}

function round(n: number): number {
  return Math.round(Number(n) * 10_000) / 10_000;
}
