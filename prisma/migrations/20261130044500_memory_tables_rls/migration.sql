-- Row-level security for the memory, retrieval and working-tool tables, exactly as
-- 20261130035551_tenant_isolation does for the others (docs/tenancy.md). Their grants came
-- with that migration, which ran after these tables were created.

ALTER TABLE "memories" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "memories" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "memories"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "memories" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "rag_documents" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "rag_documents" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "rag_documents"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "rag_documents" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "rag_chunks" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "rag_chunks" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "rag_chunks"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "rag_chunks" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "todos" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "todos" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "todos"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "todos" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "skills" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "skills" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "skills"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "skills" TO runbox_system USING (true) WITH CHECK (true);
