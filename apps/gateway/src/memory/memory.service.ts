import { Injectable } from '@nestjs/common';
import { parseTextQuery } from '../search/text-query';
import { MemoryHit, MemoryRepository, MemoryView, MemoryVisibility } from './memory.repository';

/** Saving, finding and forgetting facts; shared by the memory tool and /v1/memory. */
@Injectable()
export class MemoryService {
  constructor(private readonly memories: MemoryRepository) {}

  save(tenantId: string, content: string, scope: string | null, runId?: string): Promise<{ memory: MemoryView; created: boolean }> {
    return this.memories.save(tenantId, { content: content.trim(), scope, runId });
  }

  /** Ranked by relevance when there is a query, newest first otherwise. */
  async find(tenantId: string, visibility: MemoryVisibility, query: string | undefined, limit: number): Promise<Array<MemoryView | MemoryHit>> {
    const parsed = parseTextQuery(query ?? '');
    if (!parsed.text) return this.memories.list(tenantId, visibility, limit);
    return this.memories.search(tenantId, visibility, parsed, limit);
  }

  get(tenantId: string, visibility: MemoryVisibility, id: string): Promise<MemoryView | null> {
    return this.memories.find(tenantId, visibility, id);
  }

  delete(tenantId: string, visibility: MemoryVisibility, id: string): Promise<boolean> {
    return this.memories.delete(tenantId, visibility, id);
  }
}
