import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { parseStoredRunDefaults, RunDefaults } from './run-defaults';

/**
 * Reads the run defaults a new run starts from. Keys are deployment-wide data that tenant
 * connections cannot read (docs/tenancy.md), so this reads through the system connection,
 * always naming both the tenant and the key.
 */
@Injectable()
export class RunDefaultsRepository {
  constructor(private readonly db: PrismaService) {}

  async forRun(tenantId: string, apiKeyId: string | undefined): Promise<{ tenant: RunDefaults | null; apiKey: RunDefaults | null }> {
    // One statement outside a transaction: read for every new run.
    const [row] = await this.db.systemSql<{ tenant: unknown; api_key: unknown }>(Prisma.sql`
      SELECT t.run_defaults AS tenant,
             (SELECT k.run_defaults FROM api_keys k WHERE k.id = ${apiKeyId ?? null}::text AND k.tenant_id = t.id) AS api_key
        FROM tenants t WHERE t.id = ${tenantId}`);
    return { tenant: parseStoredRunDefaults(row?.tenant), apiKey: parseStoredRunDefaults(row?.api_key) };
  }

  /** The tools the tenant's operator marked as needing approval in every run of the tenant. */
  async approvalRequired(tenantId: string): Promise<ReadonlySet<string>> {
    // One statement outside a transaction: read at every run's start.
    const [tenant] = await this.db.systemSql<{ approval_required: string[] }>(Prisma.sql`SELECT approval_required FROM tenants WHERE id = ${tenantId}`);
    return new Set(tenant?.approval_required ?? []);
  }
}
