import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';

/** Sandboxes by executor, across tenants: for the operator's view of an executor (admin routes only). */
@Injectable()
export class ExecutorSandboxesRepository {
  constructor(private readonly db: PrismaService) {}

  /** Sandboxes of live sessions whose row names this executor. */
  countLive(executorId: string): Promise<number> {
    return this.db.system((tx) => tx.sandbox.count({ where: { executorId, state: { not: 'removed' }, session: { status: 'active' } } }));
  }
}
