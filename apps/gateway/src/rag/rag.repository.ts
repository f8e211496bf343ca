import { Injectable } from '@nestjs/common';
import { newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { escapeLike, identifierWords, TextQuery } from '../search/text-query';
import { Chunk } from './chunker';

export interface DocumentToWrite {
  path: string;
  sha256: string;
  sizeBytes: number;
  lineCount: number;
  chunks: Chunk[];
  /** One unit vector per chunk, when an embeddings provider is configured. */
  embeddings?: number[][];
}

export interface ChunkHit {
  id: string;
  path: string;
  startLine: number;
  endLine: number;
  content: string;
  score: number;
  match: 'text' | 'fuzzy' | 'vector';
}

interface ChunkRow {
  id: bigint;
  path: string;
  start_line: number;
  end_line: number;
  content: string;
  score: number;
}

/**
 * The retrieval index of each session's workspace: one row per indexed file and one per
 * chunk, always within one tenant and one session.
 */
@Injectable()
export class RagRepository {
  constructor(private readonly db: PrismaService) {}

  /** path → sha256 of what is indexed at `root` (a file) or under it (a folder; '.' = everything). */
  async indexedUnder(tenantId: string, sessionId: string, root: string): Promise<Map<string, string>> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<Array<{ path: string; sha256: string }>>`
        SELECT path, sha256 FROM rag_documents
        WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} AND ${underRoot(root)}`,
    );
    return new Map(rows.map((r) => [r.path, r.sha256]));
  }

  /**
   * Replaces the documents at these paths (and their chunks) with the new versions, in one
   * transaction. Writers of the same path take turns (a lock per path), so two indexers
   * covering one file never interleave, while one indexer's batches run side by side.
   */
  async replaceDocuments(tenantId: string, sessionId: string, docs: DocumentToWrite[]): Promise<void> {
    if (!docs.length) return;
    const ids = docs.map(() => newId('doc'));
    const chunks = docs.flatMap((d, i) => d.chunks.map((c, j) => ({ docId: ids[i], path: d.path, chunk: c, embedding: d.embeddings?.[j] })));
    await this.db.tenant(tenantId, async (tx) => {
      await lockPaths(tx, sessionId, docs.map((d) => d.path));
      await tx.$executeRaw`
        DELETE FROM rag_documents WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} AND path = ANY(${docs.map((d) => d.path)}::text[])`;
      await tx.$executeRaw`
        INSERT INTO rag_documents (id, tenant_id, session_id, path, sha256, size_bytes, line_count, chunk_count)
        SELECT id, ${tenantId}, ${sessionId}, path, sha256, size_bytes, line_count, chunk_count
        FROM unnest(${ids}::text[], ${docs.map((d) => d.path)}::text[], ${docs.map((d) => d.sha256)}::text[],
                    ${docs.map((d) => d.sizeBytes)}::int[], ${docs.map((d) => d.lineCount)}::int[], ${docs.map((d) => d.chunks.length)}::int[])
             AS d(id, path, sha256, size_bytes, line_count, chunk_count)`;
      if (!chunks.length) return;
      await tx.$executeRaw`
        INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search, embedding)
        SELECT ${tenantId}, ${sessionId}, doc_id, path, start_line, end_line, content,
               setweight(to_tsvector('simple', path_words), 'A') || setweight(to_tsvector('simple', words), 'B'),
               embedding::real[]
        FROM unnest(${chunks.map((c) => c.docId)}::text[], ${chunks.map((c) => c.path)}::text[],
                    ${chunks.map((c) => c.chunk.startLine)}::int[], ${chunks.map((c) => c.chunk.endLine)}::int[],
                    ${chunks.map((c) => c.chunk.content)}::text[], ${chunks.map((c) => identifierWords(c.path))}::text[],
                    ${chunks.map((c) => identifierWords(c.chunk.content))}::text[],
                    ${chunks.map((c) => (c.embedding ? `{${c.embedding.join(',')}}` : null))}::text[])
             AS c(doc_id, path, start_line, end_line, content, path_words, words, embedding)`;
    });
  }

  /**
   * Removes documents at or under `root` that are not in `keep` (files deleted or no longer
   * indexable). A file another indexer added meanwhile may go too; indexing it again
   * brings it back.
   */
  async removeOthers(tenantId: string, sessionId: string, root: string, keep: string[]): Promise<number> {
    return this.db.tenant(tenantId, (tx) =>
      tx.$executeRaw`
        DELETE FROM rag_documents
        WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} AND ${underRoot(root)} AND NOT (path = ANY(${keep}::text[]))`,
    );
  }

  async stats(tenantId: string, sessionId: string): Promise<{ documents: number; chunks: number }> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<Array<{ documents: bigint; chunks: bigint }>>`
        SELECT count(*) AS documents, COALESCE(sum(chunk_count), 0)::bigint AS chunks
        FROM rag_documents WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}`,
    );
    return { documents: Number(rows[0].documents), chunks: Number(rows[0].chunks) };
  }

  /**
   * Chunks holding every query word, by ts_rank (path words weigh most); when those are
   * fewer than `limit`, chunks holding some of the words fill the rest. Two selective
   * queries: the any-word query alone would rank every chunk with one common word.
   */
  async searchText(tenantId: string, sessionId: string, query: TextQuery, limit: number): Promise<ChunkHit[]> {
    if (!query.anyTerms || !query.allTerms) return [];
    const hits = await this.rankedText(tenantId, sessionId, query.allTerms, limit, []);
    if (hits.length < limit && query.terms.length > 1) {
      hits.push(...(await this.rankedText(tenantId, sessionId, query.anyTerms, limit - hits.length, hits.map((h) => h.id))));
    }
    return hits;
  }

  /** Runs in the database's search function, so the index answers under row-level security. */
  private async rankedText(tenantId: string, sessionId: string, tsquery: string, limit: number, exclude: string[]): Promise<ChunkHit[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<ChunkRow[]>`
        SELECT id, path, start_line, end_line, content, score
        FROM search_rag_chunks(${sessionId}, ${tsquery}, ${exclude}::text[], ${limit}::int)`,
    );
    return rows.map((r) => toHit(r, 'text'));
  }

  /**
   * Substring matches: the fallback for text the parser does not split into words (Chinese,
   * fragments of identifiers). The trigram index serves ILIKE (inside the search function, so
   * under row-level security too); the hits are unranked, and not sorted either, so a common
   * substring stops at `limit` rows instead of rechecking every chunk. Trigram similarity
   * (typos) is left out here: rechecking it on thousands of multi-kilobyte chunks took
   * seconds when nothing matched (bench/rag.bench.ts).
   */
  async searchFuzzy(tenantId: string, sessionId: string, query: TextQuery, limit: number, exclude: string[]): Promise<ChunkHit[]> {
    if (!query.text) return [];
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<ChunkRow[]>`
        SELECT id, path, start_line, end_line, content, 1::float AS score
        FROM search_rag_chunks_substring(${sessionId}, ${query.likePattern}, ${exclude}::text[], ${limit}::int)`,
    );
    return rows.map((r) => toHit(r, 'fuzzy'));
  }

  /**
   * Nearest chunks by cosine similarity (vectors are unit length, so a dot product). Without
   * pgvector this is an exact scan of the session's vectors; with it, the column becomes
   * vector(n), this query `ORDER BY embedding <=> $1`, and an HNSW index makes it sublinear.
   */
  async searchVector(tenantId: string, sessionId: string, vector: number[], limit: number): Promise<ChunkHit[]> {
    const literal = `{${vector.join(',')}}`;
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<ChunkRow[]>`
        SELECT c.id, c.path, c.start_line, c.end_line, c.content,
               (SELECT sum(e * q) FROM unnest(c.embedding, ${literal}::real[]) AS t(e, q)) AS score
        FROM rag_chunks c
        WHERE c.tenant_id = ${tenantId} AND c.session_id = ${sessionId} AND c.embedding IS NOT NULL
        ORDER BY score DESC NULLS LAST, c.path, c.start_line
        LIMIT ${limit}`,
    );
    return rows.map((r) => toHit(r, 'vector'));
  }

  /** The plain alternative the bench compares against: a case-insensitive substring scan. */
  async scanSubstring(tenantId: string, sessionId: string, text: string, limit: number): Promise<ChunkHit[]> {
    const rows = await this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<ChunkRow[]>`
        SELECT c.id, c.path, c.start_line, c.end_line, c.content, 1::float AS score
        FROM rag_chunks c
        WHERE c.tenant_id = ${tenantId} AND c.session_id = ${sessionId} AND c.content ILIKE ${`%${escapeLike(text)}%`}
        ORDER BY c.path, c.start_line LIMIT ${limit}`,
    );
    return rows.map((r) => toHit(r, 'fuzzy'));
  }
}

/** Takes a transaction lock per path, in one order everywhere so two writers cannot deadlock. */
async function lockPaths(tx: Prisma.TransactionClient, sessionId: string, paths: string[]): Promise<void> {
  await tx.$executeRaw`
    SELECT pg_advisory_xact_lock(key) FROM (
      SELECT DISTINCT hashtext('rag:' || ${sessionId} || ':' || p) AS key FROM unnest(${paths}::text[]) AS p ORDER BY key
    ) AS keys`;
}

function underRoot(root: string): Prisma.Sql {
  if (root === '.' || root === '') return Prisma.sql`TRUE`;
  return Prisma.sql`(path = ${root} OR path LIKE ${`${escapeLike(root)}/%`})`;
}

function toHit(r: ChunkRow, match: ChunkHit['match']): ChunkHit {
  return {
    id: String(r.id),
    path: r.path,
    startLine: r.start_line,
    endLine: r.end_line,
    content: r.content,
    score: Math.round(Number(r.score) * 10_000) / 10_000,
    match,
  };
}
