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
    return this.db.system(async (tx) => {
      const tenant = await tx.tenant.findUnique({ where: { id: tenantId }, select: { runDefaults: true } });
      const key = apiKeyId
        ? await tx.apiKey.findFirst({ where: { id: apiKeyId, tenantId }, select: { runDefaults: true } })
        : null;
      return { tenant: parseStoredRunDefaults(tenant?.runDefaults), apiKey: parseStoredRunDefaults(key?.runDefaults) };
    });
  }

  /** The tools the tenant's operator marked as needing approval in every run of the tenant. */
  async approvalRequired(tenantId: string): Promise<ReadonlySet<string>> {
    // Raw SQL: read at every run's start, and an ORM statement costs a query compilation.
    const [tenant] = await this.db.system((tx) => tx.$queryRaw<Array<{ approval_required: string[] }>>`SELECT approval_required FROM tenants WHERE id = ${tenantId}`);
    return new Set(tenant?.approval_required ?? []);
  }
}
