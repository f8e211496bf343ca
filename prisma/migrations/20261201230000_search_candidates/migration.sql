-- Search at a million rows a tenant (docs/memory-and-retrieval.md, "Search at scale").
-- The search functions ranked every row holding the query's words: a word in a few percent
-- of a tenant's million messages meant tens of thousands of rows read and ranked, a second
-- a search. Now each ranks a bounded candidate set: the newest CANDIDATES (500) rows that
-- match, found either through the GIN index (few matches) or by walking a (owner, time)
-- btree index newest first and testing each row until enough match (many matches; the
-- planner picks, each call planned for its own words). Rows holding every query word and,
-- for retrieval, chunks whose path holds a query word are candidates of their own, so
-- neither is crowded out by the newest rows holding one common word.

-- messages keeps its tsvector, so testing a row during that walk and ranking a candidate
-- read it instead of parsing the text again. The expression index it replaces computed the
-- same value on every write; the column costs its size on disk.
ALTER TABLE "messages" ADD COLUMN "search" tsvector
  GENERATED ALWAYS AS (to_tsvector('english'::regconfig, COALESCE("content", ''))) STORED;
DROP INDEX "messages_content_search_idx";
CREATE INDEX "messages_search_idx" ON "messages" USING GIN ("tenant_id", "search");
CREATE INDEX "messages_tenant_id_created_at_idx" ON "messages" ("tenant_id", "created_at");

-- rag_chunks: the path words (weight A, which the gateway gives them) on their own, so a
-- file name match is a candidate however many newer chunks hold the word in their text.
ALTER TABLE "rag_chunks" ADD COLUMN "path_search" tsvector
  GENERATED ALWAYS AS (ts_filter("search", '{a}')) STORED;
CREATE INDEX "rag_chunks_path_search_idx" ON "rag_chunks" USING GIN ("session_id", "path_search");
-- Newest first within a session: ids grow with every write. On -id, an order the primary
-- key cannot give: walking the primary key backwards would pass every newer chunk of every
-- other session first, and the planner, taking a session's chunks to be spread evenly, would
-- pick it (with session_id fixed, "session_id, id" orders as "id" alone).
CREATE INDEX "rag_chunks_session_id_newest_idx" ON "rag_chunks" ("session_id", (-"id"));

-- The functions keep their signatures (and so their grants: CREATE OR REPLACE keeps them),
-- their tenant rule (app.tenant_id, filtered here) and their order of results.

CREATE OR REPLACE FUNCTION search_memories(any_terms text, all_terms text, scope_filter text, any_scope boolean, max_rows integer)
RETURNS TABLE (id text, scope text, content text, run_id text, created_at timestamptz, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  -- Candidates: the newest 500 facts holding every word, and the newest 500 holding any
  -- (the second only when the two queries differ), whole rows: fetching them again by id
  -- cost a random read each.
  RETURN QUERY EXECUTE $q$
    WITH candidates AS (
      (SELECT m.id, m.scope, m.content, m.run_id, m.created_at, m.search FROM memories m
        WHERE m.tenant_id = $1 AND m.search @@ to_tsquery('english', $3) AND ($5 OR m.scope IS NULL OR m.scope = $4)
        ORDER BY m.created_at DESC LIMIT 500)
      UNION ALL
      (SELECT m.id, m.scope, m.content, m.run_id, m.created_at, m.search FROM memories m
        WHERE $2 <> $3 AND m.tenant_id = $1 AND m.search @@ to_tsquery('english', $2) AND ($5 OR m.scope IS NULL OR m.scope = $4)
        ORDER BY m.created_at DESC LIMIT 500)
    ), each_once AS (
      SELECT DISTINCT ON (c.id) c.* FROM candidates c ORDER BY c.id
    )
    SELECT c.id, c.scope, c.content, c.run_id, c.created_at::timestamptz, ts_rank(c.search, to_tsquery('english', $2))
    FROM each_once c
    ORDER BY (c.search @@ to_tsquery('english', $3)) DESC, 6 DESC, c.created_at DESC
    LIMIT $6
  $q$ USING current_setting('app.tenant_id', true), any_terms, all_terms, scope_filter, any_scope, max_rows;
END
$$;

CREATE OR REPLACE FUNCTION search_messages(ts_query text, exclude_run_id text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id text, session_id text, run_id text, role text, created_at timestamptz, content text, score real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  -- Candidates: the newest 500 matching messages of live sessions.
  RETURN QUERY EXECUTE $q$
    WITH candidates AS (
      SELECT m.id, m.session_id, m.run_id, m.role, m.created_at, m.content, m.search
      FROM messages m
      WHERE m.tenant_id = $1
        AND m.search @@ to_tsquery('english', $2)
        AND m.run_id IS DISTINCT FROM $3
        AND NOT (m.id = ANY($4))
        AND EXISTS (SELECT FROM sessions s WHERE s.id = m.session_id AND s.tenant_id = $1 AND s.status = 'active')
      ORDER BY m.created_at DESC
      LIMIT 500
    )
    SELECT c.id, c.session_id, c.run_id, c.role, c.created_at::timestamptz, c.content,
           ts_rank(c.search, to_tsquery('english', $2))
    FROM candidates c
    ORDER BY 7 DESC, c.created_at DESC
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), ts_query, exclude_run_id, exclude_ids, max_rows;
END
$$;

CREATE OR REPLACE FUNCTION search_rag_chunks(chunk_session_id text, ts_query text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id bigint, path text, start_line integer, end_line integer, content text, score real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  -- Candidates: the newest 500 matching chunks, and the newest 500 whose path matches
  -- (-id: the order of rag_chunks_session_id_newest_idx).
  RETURN QUERY EXECUTE $q$
    WITH candidates AS (
      (SELECT c.id FROM rag_chunks c
        WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.search @@ to_tsquery('simple', $3) AND NOT (c.id::text = ANY($4))
        ORDER BY -c.id LIMIT 500)
      UNION
      (SELECT c.id FROM rag_chunks c
        WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.path_search @@ to_tsquery('simple', $3) AND NOT (c.id::text = ANY($4))
        ORDER BY -c.id LIMIT 500)
    )
    SELECT c.id, c.path, c.start_line, c.end_line, c.content, ts_rank(c.search, to_tsquery('simple', $3))
    FROM candidates k JOIN rag_chunks c ON c.id = k.id
    ORDER BY 6 DESC, c.path, c.start_line
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), chunk_session_id, ts_query, exclude_ids, max_rows;
END
$$;
