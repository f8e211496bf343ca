-- Memory, history search, retrieval and working state: the tables behind the memory,
-- session_search, rag_index, rag_search, todo and skill tools.
--
-- Statements are split on every semicolon when applied (the pg driver adapter), so none
-- may appear inside a comment or a string here.
--
-- Ranking is Postgres full-text search (tsvector, GIN) with pg_trgm as the fallback for
-- text the parser cannot split into words (Chinese, Japanese, typos, fragments of words).
-- The GIN indexes lead with the tenant or session (btree_gin), so a search reads only that
-- tenant's or session's entries: with the owner filter in a separate btree index, the
-- planner chose to recheck ILIKE on every chunk of a session instead (90 ms against 0.2 ms
-- for 4,000 chunks). pg_trgm and btree_gin are trusted extensions (PostgreSQL 13+), so the
-- database owner can create them.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- CreateTable
CREATE TABLE "memories" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "scope" TEXT,
    "content" TEXT NOT NULL,
    "run_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "search" tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, "content")) STORED,

    CONSTRAINT "memories_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "memories_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE INDEX "memories_tenant_id_created_at_idx" ON "memories"("tenant_id", "created_at");
CREATE INDEX "memories_search_idx" ON "memories" USING GIN ("tenant_id", "search");
CREATE INDEX "memories_content_trgm_idx" ON "memories" USING GIN ("tenant_id", "content" gin_trgm_ops);
-- Saving the same fact twice in one scope keeps one row.
CREATE UNIQUE INDEX "memories_tenant_scope_content_key" ON "memories"("tenant_id", COALESCE("scope", ''), md5("content"));

-- CreateTable
CREATE TABLE "rag_documents" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "sha256" TEXT NOT NULL,
    "size_bytes" INTEGER NOT NULL,
    "line_count" INTEGER NOT NULL,
    "chunk_count" INTEGER NOT NULL,
    "indexed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "rag_documents_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "rag_documents_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE INDEX "rag_documents_tenant_id_session_id_idx" ON "rag_documents"("tenant_id", "session_id");
CREATE UNIQUE INDEX "rag_documents_session_id_path_key" ON "rag_documents"("session_id", "path");

-- CreateTable
CREATE TABLE "rag_chunks" (
    "id" BIGSERIAL NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "document_id" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "start_line" INTEGER NOT NULL,
    "end_line" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    -- Built by the gateway from path words and identifier-split content words ('simple').
    "search" tsvector NOT NULL,
    -- Unit-length vectors from the embeddings provider, when one is configured. With
    -- pgvector installed this becomes vector(n) with an HNSW index (see docs/memory-and-retrieval.md).
    "embedding" REAL[],

    CONSTRAINT "rag_chunks_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "rag_chunks_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "rag_documents"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE INDEX "rag_chunks_tenant_id_session_id_idx" ON "rag_chunks"("tenant_id", "session_id");
CREATE INDEX "rag_chunks_document_id_idx" ON "rag_chunks"("document_id");
CREATE INDEX "rag_chunks_search_idx" ON "rag_chunks" USING GIN ("session_id", "search");
CREATE INDEX "rag_chunks_content_trgm_idx" ON "rag_chunks" USING GIN ("session_id", "content" gin_trgm_ops);

-- CreateTable
CREATE TABLE "todos" (
    "tenant_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "number" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "todos_pkey" PRIMARY KEY ("session_id","number"),
    CONSTRAINT "todos_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE INDEX "todos_tenant_id_session_id_idx" ON "todos"("tenant_id", "session_id");

-- CreateTable
CREATE TABLE "skills" (
    "tenant_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL,
    "content" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "skills_pkey" PRIMARY KEY ("tenant_id","name"),
    CONSTRAINT "skills_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- session_search: full text over every message, and trigrams over what people and models
-- wrote (tool outputs are long and noisy, and full text covers them).
CREATE INDEX "messages_content_search_idx" ON "messages" USING GIN ("tenant_id", to_tsvector('english'::regconfig, COALESCE("content", '')));
CREATE INDEX "messages_content_trgm_idx" ON "messages" USING GIN ("tenant_id", "content" gin_trgm_ops) WHERE "role" IN ('user', 'assistant');
