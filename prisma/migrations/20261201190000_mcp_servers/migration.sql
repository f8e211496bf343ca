-- MCP servers a tenant added as tool sources. Header values and stdio environment values are
-- stored sealed (AES-256-GCM with RUNBOX_CREDENTIALS_KEY, like saved servers' credentials);
-- only their names are kept in the clear, for the API. Row-level security is forced as on
-- every tenant table (docs/tenancy.md).

-- CreateTable
CREATE TABLE "mcp_servers" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "transport" TEXT NOT NULL,
    "url" TEXT,
    "command" TEXT,
    "args" JSONB NOT NULL DEFAULT '[]',
    "header_names" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "env_names" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "secrets" TEXT,
    "version" INTEGER NOT NULL DEFAULT 1,
    "status" TEXT NOT NULL DEFAULT 'unknown',
    "last_error" TEXT,
    "last_error_at" TIMESTAMPTZ(3),
    "last_success_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "mcp_servers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "mcp_servers_tenant_id_name_key" ON "mcp_servers"("tenant_id", "name");

ALTER TABLE "mcp_servers" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "mcp_servers" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "mcp_servers"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "mcp_servers" TO runbox_system USING (true) WITH CHECK (true);
