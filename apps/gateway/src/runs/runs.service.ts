import { Injectable } from '@nestjs/common';
import { AppError } from '@app/errors';
import { QuotasService } from '../quotas/quotas.service';
import { CreateRunInput } from './run-options';
import { RunQueue } from './run-queue';
import { RunsRepository, RunView } from './runs.repository';

@Injectable()
export class RunsService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly queue: RunQueue,
    private readonly quotas: QuotasService,
  ) {}

  /** Creates and queues a run; with a repeated idempotency key, returns the first run. */
  async create(tenantId: string, input: CreateRunInput, idempotencyKey?: string): Promise<{ run: RunView; created: boolean }> {
    const { session_id: sessionId, input: text, metadata, ...options } = input;
    const result = await this.quotas.admit(tenantId, () => this.runs.create(tenantId, { sessionId, input: text, options, idempotencyKey, sessionMetadata: metadata }));
    if (result === 'session_not_found') throw AppError.notFound('session', sessionId ?? '');
    if (result.created) await this.queue.enqueue(tenantId, result.run.id);
    return result;
  }

  async get(tenantId: string, id: string): Promise<RunView> {
    const run = await this.runs.find(tenantId, id);
    if (!run) throw AppError.notFound('run', id);
    return run;
  }

  list(tenantId: string, sessionId: string | undefined, limit: number): Promise<RunView[]> {
    return this.runs.listForSession(tenantId, sessionId, limit);
  }
}
