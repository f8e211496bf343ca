import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import { AppError } from '@app/errors';
import type { Response } from 'express';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { pathId } from '../common/ids';
import { noQuerySchema } from '../common/metadata';
import { TenantId } from '../common/request-context';
import { validate } from '../common/validate';
import { MemoryHit, MemoryView } from './memory.repository';
import { createMemorySchema, listMemoryQuerySchema } from './memory.schemas';
import { MemoryService } from './memory.service';

/**
 * The tenant's memory over HTTP. Without `scope` a listing shows every fact of the tenant;
 * with it, what a run with that memory_scope sees (its scope's facts and the shared ones).
 */
@Controller('v1/memory')
@UseGuards(ApiKeyGuard)
export class MemoryController {
  constructor(private readonly memory: MemoryService) {}

  @Get()
  async list(@TenantId() tenantId: string, @Query() query: unknown) {
    const q = validate(listMemoryQuerySchema, query, 'query');
    const visibility = q.scope === undefined ? ({ kind: 'all' } as const) : ({ kind: 'scope', scope: q.scope } as const);
    const found = await this.memory.find(tenantId, visibility, q.query, q.limit);
    return { data: found.map(memoryJson) };
  }

  /** 201 with the new fact, or 200 with the one already stored when the same content exists in that scope. */
  @Post()
  async create(@TenantId() tenantId: string, @Body() body: unknown, @Query() query: unknown, @Res({ passthrough: true }) res: Response) {
    validate(noQuerySchema, query, 'query');
    const input = validate(createMemorySchema, body ?? {}, 'body');
    const { memory, created } = await this.memory.save(tenantId, input.content, input.scope ?? null);
    res.status(created ? 201 : 200);
    return { ...memoryJson(memory), created };
  }

  @Get(':id')
  async get(@TenantId() tenantId: string, @Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const memory = await this.memory.get(tenantId, { kind: 'all' }, pathId('memory', id));
    if (!memory) throw AppError.notFound('memory', id);
    return memoryJson(memory);
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@TenantId() tenantId: string, @Param('id') id: string, @Query() query: unknown): Promise<void> {
    validate(noQuerySchema, query, 'query');
    if (!(await this.memory.delete(tenantId, { kind: 'all' }, pathId('memory', id)))) throw AppError.notFound('memory', id);
  }
}

function memoryJson(m: MemoryView | MemoryHit) {
  return {
    id: m.id,
    content: m.content,
    scope: m.scope,
    run_id: m.runId,
    created_at: m.createdAt.toISOString(),
    ...('score' in m ? { score: m.score, match: m.match } : {}),
  };
}
