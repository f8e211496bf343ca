import { Controller, Get, UseGuards } from '@nestjs/common';
import { AppError } from '@app/errors';
import { z } from 'zod';
import { ApiOperation, listOf, timestamp } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId } from '../common/validation/request-parts';
import { SessionsRepository } from '../sessions/sessions.repository';
import { TODO_STATUSES, TodosRepository } from './todos.repository';

export const todoListSchema = listOf(z.object({ id: z.number().int(), content: z.string(), status: z.enum(TODO_STATUSES), created_at: timestamp(), updated_at: timestamp() }));

/** GET /v1/sessions/{id}/todos: the task list the session's runs keep with the todo tool. */
@Controller('v1/sessions')
@UseGuards(ApiKeyGuard)
export class TodosController {
  constructor(
    private readonly sessions: SessionsRepository,
    private readonly todos: TodosRepository,
  ) {}

  @Get(':id/todos')
  @ApiOperation({ summary: "The session's task list, kept by its runs with the todo tool", response: todoListSchema })
  async list(@TenantId() tenantId: string, @PathId('session') sessionId: string): Promise<z.output<typeof todoListSchema>> {
    if (!(await this.sessions.find(tenantId, sessionId))) throw AppError.notFound('session', sessionId);
    const todos = await this.todos.list(tenantId, sessionId);
    return {
      data: todos.map((t) => ({ id: t.id, content: t.content, status: t.status, created_at: t.createdAt.toISOString(), updated_at: t.updatedAt.toISOString() })),
    };
  }
}
