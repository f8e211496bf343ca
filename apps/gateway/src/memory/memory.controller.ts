import { Controller, Delete, Get, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { AppError } from '@app/errors';
import type { Response } from 'express';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody, ValidQuery } from '../common/validation/request-parts';
import { MemoryHit, MemoryView } from './memory.repository';
import { CreateMemoryInput, createMemorySchema, ListMemoryQuery, listMemoryQuerySchema } from './memory.schemas';
import { memoryListSchema, memorySchema, savedMemorySchema } from './memory.responses';
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
  @ApiOperation({ summary: "List or search the tenant's memory (with `query`: best matches first)", response: memoryListSchema })
  async list(@TenantId() tenantId: string, @ValidQuery(listMemoryQuerySchema) q: ListMemoryQuery) {
    const visibility = q.scope === undefined ? ({ kind: 'all' } as const) : ({ kind: 'scope', scope: q.scope } as const);
    const found = await this.memory.find(tenantId, visibility, q.query, q.limit);
    return { data: found.map(memoryJson) };
  }

  /** 201 with the new fact, or 200 with the one already stored when the same content exists in that scope. */
  @Post()
  @ApiOperation({ summary: 'Save a fact', response: savedMemorySchema, status: 201, alsoAnswers: { 200: 'the same content was already stored in that scope: the stored fact' } })
  async create(
    @TenantId() tenantId: string,
    @ValidBody(createMemorySchema, { absent: {}, nullIsAbsent: true }) input: CreateMemoryInput,
    @Res({ passthrough: true }) res: Response,
  ) {
    const { memory, created } = await this.memory.save(tenantId, input.content, input.scope ?? null);
    res.status(created ? 201 : 200);
    return { ...memoryJson(memory), created };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a fact', response: memorySchema })
  async get(@TenantId() tenantId: string, @PathId('memory') id: string) {
    const memory = await this.memory.get(tenantId, { kind: 'all' }, id);
    if (!memory) throw AppError.notFound('memory', id);
    return memoryJson(memory);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Forget a fact' })
  async delete(@TenantId() tenantId: string, @PathId('memory') id: string): Promise<void> {
    if (!(await this.memory.delete(tenantId, { kind: 'all' }, id))) throw AppError.notFound('memory', id);
  }
}

function memoryJson(m: MemoryView | MemoryHit): z.output<typeof memorySchema> {
  return {
    id: m.id,
    content: m.content,
    scope: m.scope,
    run_id: m.runId,
    created_at: m.createdAt.toISOString(),
    ...('score' in m ? { score: m.score, match: m.match } : {}),
  };
}
