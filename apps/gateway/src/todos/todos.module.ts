import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { TodoTool } from './todo.tool';
import { TodosController } from './todos.controller';
import { TodosRepository } from './todos.repository';

/** A session's task list: the todo tool and GET /v1/sessions/{id}/todos. */
@Module({
  imports: [TenancyModule, SessionsModule],
  controllers: [TodosController],
  providers: [TodosRepository, ...gatewayToolProviders(TodoTool)],
})
export class TodosModule {}
