-- Saved SSH servers, per tenant. Credentials are stored sealed (AES-256-GCM, see
-- docs/servers.md) and row-level security is forced as on every tenant table (docs/tenancy.md).

-- CreateTable
CREATE TABLE "servers" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "port" INTEGER NOT NULL,
    "username" TEXT NOT NULL,
    "auth_type" TEXT NOT NULL,
    "credentials" TEXT NOT NULL,
    "host_key_fingerprint" TEXT,
    "host_key_pinned_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "servers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "servers_tenant_id_name_key" ON "servers"("tenant_id", "name");

ALTER TABLE "servers" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "servers" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "servers"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "servers" TO runbox_system USING (true) WITH CHECK (true);

-- Sessions whose terminal runs on a saved server (the ssh backend), forced row-level security too.
CREATE TABLE "session_ssh_backends" (
    "session_id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "server_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "session_ssh_backends_pkey" PRIMARY KEY ("session_id")
);

ALTER TABLE "session_ssh_backends" ENABLE ROW LEVEL SECURITY;
ALTER TABLE "session_ssh_backends" FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON "session_ssh_backends"
  USING ("tenant_id" = current_setting('app.tenant_id', true))
  WITH CHECK ("tenant_id" = current_setting('app.tenant_id', true));
CREATE POLICY system_access ON "session_ssh_backends" TO runbox_system USING (true) WITH CHECK (true);
