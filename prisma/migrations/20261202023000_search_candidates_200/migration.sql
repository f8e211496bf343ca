-- Each search ranks the newest 200 matches instead of 500 (docs/memory-and-retrieval.md,
-- "Search at scale"). At a million rows a tenant the walk down the (owner, time) index is
-- most of a search's cost when a word is common: it tests rows until enough match, the
-- bound ÷ the word's share of rows, a page for every 15 to 20 of them; at 500 a two-word
-- query matching one fact in 125 tested 62,000 facts (4,800 pages). Ranking the best 10 of
-- the newest 200 matches keeps the same rule (a recent match over an older one that repeats
-- the word) with a walk 2.5 times shorter. Only the bound changes: the bodies are those of
-- 20261201230000_search_candidates, and CREATE OR REPLACE keeps the grants but not the
-- settings, so jit = off is stated again (20261202020000_search_functions_no_jit).

CREATE OR REPLACE FUNCTION search_memories(any_terms text, all_terms text, scope_filter text, any_scope boolean, max_rows integer)
RETURNS TABLE (id text, scope text, content text, run_id text, created_at timestamptz, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET jit = off
AS $$
BEGIN
  -- Candidates: the newest 200 facts holding every word, and the newest 200 holding any
  -- (the second only when the two queries differ), whole rows: fetching them again by id
  -- cost a random read each.
  RETURN QUERY EXECUTE $q$
    WITH candidates AS (
      (SELECT m.id, m.scope, m.content, m.run_id, m.created_at, m.search FROM memories m
        WHERE m.tenant_id = $1 AND m.search @@ to_tsquery('english', $3) AND ($5 OR m.scope IS NULL OR m.scope = $4)
        ORDER BY m.created_at DESC LIMIT 200)
      UNION ALL
      (SELECT m.id, m.scope, m.content, m.run_id, m.created_at, m.search FROM memories m
        WHERE $2 <> $3 AND m.tenant_id = $1 AND m.search @@ to_tsquery('english', $2) AND ($5 OR m.scope IS NULL OR m.scope = $4)
        ORDER BY m.created_at DESC LIMIT 200)
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
SET jit = off
AS $$
BEGIN
  -- Candidates: the newest 200 matching messages of live sessions.
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
      LIMIT 200
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
SET jit = off
AS $$
BEGIN
  -- Candidates: the newest 200 matching chunks, and the newest 200 whose path matches
  -- (-id: the order of rag_chunks_session_id_newest_idx).
  RETURN QUERY EXECUTE $q$
    WITH candidates AS (
      (SELECT c.id FROM rag_chunks c
        WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.search @@ to_tsquery('simple', $3) AND NOT (c.id::text = ANY($4))
        ORDER BY -c.id LIMIT 200)
      UNION
      (SELECT c.id FROM rag_chunks c
        WHERE c.tenant_id = $1 AND c.session_id = $2 AND c.path_search @@ to_tsquery('simple', $3) AND NOT (c.id::text = ANY($4))
        ORDER BY -c.id LIMIT 200)
    )
    SELECT c.id, c.path, c.start_line, c.end_line, c.content, ts_rank(c.search, to_tsquery('simple', $3))
    FROM candidates k JOIN rag_chunks c ON c.id = k.id
    ORDER BY 6 DESC, c.path, c.start_line
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), chunk_session_id, ts_query, exclude_ids, max_rows;
END
$$;
