-- Search at scale under forced row-level security (docs/memory-and-retrieval.md, "Search at
-- scale"). Under a tenant_isolation policy Postgres evaluates no operator that is not
-- leakproof before the policy, so the text-search and trigram operators (@@, ILIKE, <%)
-- could not be index conditions: a search read every index entry of the tenant (or
-- session) and filtered the rows, and a query that matched nothing scanned them all.
-- LEAKPROOF needs a superuser. Instead each search runs in a SECURITY DEFINER function
-- owned by the schema owner, which
--   * takes the tenant from the transaction's app.tenant_id (never from an argument) and
--     filters by it itself, so with no tenant set it finds nothing,
--   * reads the searched table through a SELECT-only policy for the owner that is always
--     true, so the planner has no policy to keep the operators behind,
--   * pins search_path, and may be executed by runbox_app only.
-- Each runs its query with EXECUTE, so it is planned for the values at hand (the tenant,
-- the words): a SQL function's generic plan was three to four times slower here.
-- The owner already owns these tables (it could switch row-level security off), so the
-- read policy gives it nothing new; the services never connect as the owner.

CREATE POLICY search_definer ON "memories" FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY search_definer ON "messages" FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY search_definer ON "rag_chunks" FOR SELECT TO CURRENT_USER USING (true);
-- session_search joins sessions (live ones only); under its tenant policy the join was
-- planned badly (a second a search at 20,000 messages, against 30 ms without it).
CREATE POLICY search_definer ON "sessions" FOR SELECT TO CURRENT_USER USING (true);

-- memory: full text. Facts holding every word first (all_terms), then by rank over any word.
-- Visibility: every scope (any_scope), else the shared facts plus those of scope_filter.
CREATE FUNCTION search_memories(any_terms text, all_terms text, scope_filter text, any_scope boolean, max_rows integer)
RETURNS TABLE (id text, scope text, content text, run_id text, created_at timestamptz, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT m.id, m.scope, m.content, m.run_id, m.created_at::timestamptz, ts_rank(m.search, to_tsquery('english', $2))
    FROM memories m
    WHERE m.tenant_id = $1
      AND m.search @@ to_tsquery('english', $2)
      AND ($5 OR m.scope IS NULL OR m.scope = $4)
    ORDER BY (m.search @@ to_tsquery('english', $3)) DESC, 6 DESC, m.created_at DESC
    LIMIT $6
  $q$ USING current_setting('app.tenant_id', true), any_terms, all_terms, scope_filter, any_scope, max_rows;
END
$$;

-- memory: the fallback, substring or trigram word similarity (typos), best first.
CREATE FUNCTION search_memories_fuzzy(query_text text, like_pattern text, scope_filter text, any_scope boolean, exclude_ids text[], max_rows integer)
RETURNS TABLE (id text, scope text, content text, run_id text, created_at timestamptz, similarity real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT m.id, m.scope, m.content, m.run_id, m.created_at::timestamptz,
           GREATEST(word_similarity($2, m.content), CASE WHEN m.content ILIKE $3 THEN 1 ELSE 0 END)::real
    FROM memories m
    WHERE m.tenant_id = $1
      AND ($5 OR m.scope IS NULL OR m.scope = $4)
      AND NOT (m.id = ANY($6))
      AND (m.content ILIKE $3 OR $2 <% m.content)
    ORDER BY 6 DESC, m.created_at DESC
    LIMIT $7
  $q$ USING current_setting('app.tenant_id', true), query_text, like_pattern, scope_filter, any_scope, exclude_ids, max_rows;
END
$$;

-- session_search: full text over the messages of the tenant's live sessions, best first.
CREATE FUNCTION search_messages(ts_query text, exclude_run_id text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id text, session_id text, run_id text, role text, created_at timestamptz, content text, score real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT m.id, m.session_id, m.run_id, m.role, m.created_at::timestamptz, m.content,
           ts_rank(to_tsvector('english', COALESCE(m.content, '')), to_tsquery('english', $2))
    FROM messages m
    JOIN sessions s ON s.id = m.session_id AND s.tenant_id = $1 AND s.status = 'active'
    WHERE m.tenant_id = $1
      AND to_tsvector('english', COALESCE(m.content, '')) @@ to_tsquery('english', $2)
      AND m.run_id IS DISTINCT FROM $3
      AND NOT (m.id = ANY($4))
    ORDER BY 7 DESC, m.created_at DESC
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), ts_query, exclude_run_id, exclude_ids, max_rows;
END
$$;

-- session_search: the fallback, substring matches in user and assistant messages, newest first.
CREATE FUNCTION search_messages_substring(like_pattern text, exclude_run_id text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id text, session_id text, run_id text, role text, created_at timestamptz, content text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT m.id, m.session_id, m.run_id, m.role, m.created_at::timestamptz, m.content
    FROM messages m
    JOIN sessions s ON s.id = m.session_id AND s.tenant_id = $1 AND s.status = 'active'
    WHERE m.tenant_id = $1
      AND m.role IN ('user', 'assistant')
      AND m.content ILIKE $2
      AND m.run_id IS DISTINCT FROM $3
      AND NOT (m.id = ANY($4))
    ORDER BY m.created_at DESC
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), like_pattern, exclude_run_id, exclude_ids, max_rows;
END
$$;

-- rag_search: full text over one session's chunks, best first (path words weigh most).
CREATE FUNCTION search_rag_chunks(chunk_session_id text, ts_query text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id bigint, path text, start_line integer, end_line integer, content text, score real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT c.id, c.path, c.start_line, c.end_line, c.content, ts_rank(c.search, to_tsquery('simple', $3))
    FROM rag_chunks c
    WHERE c.tenant_id = $1
      AND c.session_id = $2
      AND c.search @@ to_tsquery('simple', $3)
      AND NOT (c.id::text = ANY($4))
    ORDER BY 6 DESC, c.path, c.start_line
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), chunk_session_id, ts_query, exclude_ids, max_rows;
END
$$;

-- rag_search: the fallback, substring matches in one session's chunks, unranked.
CREATE FUNCTION search_rag_chunks_substring(chunk_session_id text, like_pattern text, exclude_ids text[], max_rows integer)
RETURNS TABLE (id bigint, path text, start_line integer, end_line integer, content text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
  RETURN QUERY EXECUTE $q$
    SELECT c.id, c.path, c.start_line, c.end_line, c.content
    FROM rag_chunks c
    WHERE c.tenant_id = $1
      AND c.session_id = $2
      AND c.content ILIKE $3
      AND NOT (c.id::text = ANY($4))
    LIMIT $5
  $q$ USING current_setting('app.tenant_id', true), chunk_session_id, like_pattern, exclude_ids, max_rows;
END
$$;

-- Functions are executable by PUBLIC unless revoked: only the services' tenant role may call these.
DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY[
    'search_memories(text, text, text, boolean, integer)',
    'search_memories_fuzzy(text, text, text, boolean, text[], integer)',
    'search_messages(text, text, text[], integer)',
    'search_messages_substring(text, text, text[], integer)',
    'search_rag_chunks(text, text, text[], integer)',
    'search_rag_chunks_substring(text, text, text[], integer)'
  ] LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO runbox_app', fn);
  END LOOP;
END
$$;
