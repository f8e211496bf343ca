import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';
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
    // One raw statement: read for every new run, and an ORM statement costs a query compilation.
    const [row] = await this.db.system((tx) =>
      tx.$queryRaw<Array<{ tenant: unknown; api_key: unknown }>>`
        SELECT t.run_defaults AS tenant,
               (SELECT k.run_defaults FROM api_keys k WHERE k.id = ${apiKeyId ?? null}::text AND k.tenant_id = t.id) AS api_key
          FROM tenants t WHERE t.id = ${tenantId}`,
    );
    return { tenant: parseStoredRunDefaults(row?.tenant), apiKey: parseStoredRunDefaults(row?.api_key) };
  }

  /** The tools the tenant's operator marked as needing approval in every run of the tenant. */
  async approvalRequired(tenantId: string): Promise<ReadonlySet<string>> {
    // Raw SQL: read at every run's start, and an ORM statement costs a query compilation.
    const [tenant] = await this.db.system((tx) => tx.$queryRaw<Array<{ approval_required: string[] }>>`SELECT approval_required FROM tenants WHERE id = ${tenantId}`);
    return new Set(tenant?.approval_required ?? []);
  }
}
