-- Tenant isolation enforced by Postgres itself (docs/tenancy.md).
--
-- Roles are cluster-wide, so they are created outside migrations (scripts/infra.sh on a
-- development machine, the operator in a deployment). This migration grants them what they
-- need in this database, and fails with "role runbox_app does not exist" when they are missing.
--   runbox_app     tenant work. Owns nothing, cannot bypass row-level security: sees a row
--                  only when its tenant id equals the transaction's app.tenant_id.
--   runbox_system  deployment-wide work (key lookup, admin, the executor's sweeps). Sees
--                  every tenant's rows, through the explicit system_access policies below.
-- FORCE makes the policies hold for the owner (whoever runs the migrations) too.
--
-- The migration runner splits scripts at every semicolon, so this file has no DO blocks or
-- functions, and no semicolon anywhere but at the end of a statement.

-- CreateIndex: the runs_per_minute window counts a tenant's recent runs.
CREATE INDEX "runs_tenant_id_created_at_idx" ON "runs"("tenant_id", "created_at");

-- Privileges. Tables and sequences that later migrations create get the same grants.
GRANT USAGE ON SCHEMA public TO runbox_app, runbox_system;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO runbox_app, runbox_system;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO runbox_app, runbox_system;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO runbox_app, runbox_system;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO runbox_app, runbox_system;
-- Migration bookkeeping is the owner's alone.
REVOKE ALL ON "_prisma_migrations" FROM runbox_app, runbox_system;
-- Tenants and keys are written by deployment-wide work only. A tenant may read its own
-- tenant row (its limits) and nothing of api_keys.
REVOKE INSERT, UPDATE, DELETE ON "tenants" FROM runbox_app;
REVOKE ALL ON "api_keys" FROM runbox_app;

-- Row-level security, enabled and forced on every table, each with two policies:
--   tenant_isolation (every role): the row's tenant is the transaction's app.tenant_id.
--     current_setting(.., true) is NULL when unset, so a transaction without a tenant sees
--     nothing and can write nothing.
--   system_access (runbox_system only): every row.
-- A migration that adds a table repeats these four statements for it
-- (test/rls.e2e-spec.ts fails for any table without them).

ALTER TABLE "tenants" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "tenants" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "tenants"
  USING ("id" = current_setting('app.tenant_id', true))
  WITH CHECK ("id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "tenants" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "api_keys" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "api_keys" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "api_keys"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "api_keys" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "sessions" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "sessions" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "sessions"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "sessions" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "sandboxes" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "sandboxes" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "sandboxes"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "sandboxes" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "messages" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "messages" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "messages"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "messages" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "runs" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "runs" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "runs"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "runs" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "run_events" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "run_events" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "run_events"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "run_events" TO runbox_system USING (true) WITH CHECK (true);

ALTER TABLE "tool_calls" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "tool_calls" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "tool_calls"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "tool_calls" TO runbox_system USING (true) WITH CHECK (true);
