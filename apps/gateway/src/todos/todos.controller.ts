import { Controller, Get, UseGuards } from '@nestjs/common';
import { AppError } from '@app/errors';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId } from '../common/validation/request-parts';
import { SessionsRepository } from '../sessions/sessions.repository';
import { TodosRepository } from './todos.repository';

/** GET /v1/sessions/{id}/todos: the task list the session's runs keep with the todo tool. */
@Controller('v1/sessions')
@UseGuards(ApiKeyGuard)
export class TodosController {
  constructor(
    private readonly sessions: SessionsRepository,
    private readonly todos: TodosRepository,
  ) {}

  @Get(':id/todos')
  async list(@TenantId() tenantId: string, @PathId('session') sessionId: string) {
    if (!(await this.sessions.find(tenantId, sessionId))) throw AppError.notFound('session', sessionId);
    const todos = await this.todos.list(tenantId, sessionId);
    return {
      data: todos.map((t) => ({ id: t.id, content: t.content, status: t.status, created_at: t.createdAt.toISOString(), updated_at: t.updatedAt.toISOString() })),
    };
  }
}
