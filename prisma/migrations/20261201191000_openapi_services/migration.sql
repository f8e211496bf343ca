-- OpenAPI services, per tenant: each chosen operation of the stored document is a tool.
-- Credentials are stored sealed (AES-256-GCM, see docs/openapi-services.md) and row-level
-- security is forced as on every tenant table (docs/tenancy.md).

-- CreateTable
CREATE TABLE "openapi_services" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "spec_url" TEXT,
    "document" JSONB NOT NULL,
    "auth_type" TEXT,
    "auth" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "openapi_services_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "openapi_services_tenant_id_name_key" ON "openapi_services"("tenant_id", "name");

ALTER TABLE "openapi_services" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "openapi_services" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "openapi_services"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "openapi_services" TO runbox_system USING (true) WITH CHECK (true);
