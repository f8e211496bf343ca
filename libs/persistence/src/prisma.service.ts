import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma, PrismaClient } from '@prisma/client';

export type Tx = Prisma.TransactionClient;

/**
 * The database connection. Repositories reach tables only through `tenant()` (work on one
 * tenant's rows: the transaction carries the tenant id for row-level security) or
 * `system()` (deployment-wide work: authentication, admin, the executor's sweeps).
 */
export class PrismaService {
  readonly client: PrismaClient;

  constructor(connectionString: string) {
    this.client = new PrismaClient({ adapter: new PrismaPg({ connectionString, max: 10 }) });
  }

  /** Runs `work` in one transaction whose `app.tenant_id` is `tenantId`. */
  tenant<T>(tenantId: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.client.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT set_config('app.tenant_id', ${tenantId}, true)`;
      return work(tx);
    });
  }

  /** Deployment-wide work that is not on behalf of one tenant. */
  system<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.client.$transaction((tx) => work(tx));
  }

  async ping(): Promise<boolean> {
    try {
      await this.client.$queryRaw`SELECT 1`;
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.client.$disconnect();
  }
}
