-- The search functions run short queries, but some of their estimates grow with the tenant:
-- the GIN path, which reads every match before keeping the newest 500, was estimated at
-- 11,000 (messages) to 18,000 (retrieval) for a word in 2,000-5,000 of a tenant's million rows,
-- and ten times the rows pass jit_above_cost (100,000 by default). Postgres would then
-- compile the query with LLVM before running it, tens of milliseconds for a query that
-- itself takes a few. JIT pays off for long analytical scans, never for these, so it is off
-- inside them whatever the server's setting (docs/memory-and-retrieval.md, "Search at scale").
ALTER FUNCTION search_memories(text, text, text, boolean, integer) SET jit = off;
ALTER FUNCTION search_memories_fuzzy(text, text, text, boolean, text[], integer) SET jit = off;
ALTER FUNCTION search_messages(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_messages_substring(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_rag_chunks(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_rag_chunks_substring(text, text, text[], integer) SET jit = off;
