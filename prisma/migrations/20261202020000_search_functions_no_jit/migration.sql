-- The search functions run short queries whose cost estimates, at a million rows a tenant,
-- pass jit_above_cost (100,000 by default): Postgres then compiles the query with LLVM
-- before running it, tens of milliseconds for a query that reads a few hundred rows. JIT
-- pays off for long analytical scans, never for these, so it is off inside them whatever
-- the server's setting (docs/memory-and-retrieval.md, "Search at scale").
ALTER FUNCTION search_memories(text, text, text, boolean, integer) SET jit = off;
ALTER FUNCTION search_memories_fuzzy(text, text, text, boolean, text[], integer) SET jit = off;
ALTER FUNCTION search_messages(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_messages_substring(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_rag_chunks(text, text, text[], integer) SET jit = off;
ALTER FUNCTION search_rag_chunks_substring(text, text, text[], integer) SET jit = off;
