-- A tenant's egress rules (domains its outbound tools may or may not reach), set by the
-- admin API and read by every outbound tool on the tenant's behalf. Row-level security as
-- for other tenant data (docs/tenancy.md): a tenant's transaction sees only its own row.

CREATE TABLE "tenant_egress_rules" (
    "tenant_id" TEXT NOT NULL,
    "allow" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "deny" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "tenant_egress_rules_pkey" PRIMARY KEY ("tenant_id")
);

ALTER TABLE "tenant_egress_rules" ADD CONSTRAINT "tenant_egress_rules_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "tenant_egress_rules" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "tenant_egress_rules" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "tenant_egress_rules"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "tenant_egress_rules" TO runbox_system USING (true) WITH CHECK (true);
