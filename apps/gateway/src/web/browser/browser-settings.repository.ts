import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';

/** What an operator opened of the browser tool to a tenant (columns of the tenant's row). */
@Injectable()
export class BrowserSettingsRepository {
  constructor(private readonly db: PrismaService) {}

  /** Whether the tenant's runs may use the evaluate action; read in the tenant's own transaction. */
  async evaluateAllowed(tenantId: string): Promise<boolean> {
    const row = await this.db.tenant(tenantId, (tx) => tx.tenant.findUnique({ where: { id: tenantId }, select: { browserEvaluate: true } }));
    return row?.browserEvaluate ?? false;
  }
}
