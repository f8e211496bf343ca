import { Provider, Type } from '@nestjs/common';
import { RUNBOX_CONFIG } from '@app/config';
import { createEmbeddingsProvider, EMBEDDINGS_PROVIDER } from '../embeddings/embeddings.provider';
import { HistoryRepository } from '../history/history.repository';
import { SessionSearchTool } from '../history/session-search.tool';
import { MemoryController } from '../memory/memory.controller';
import { MemoryRepository } from '../memory/memory.repository';
import { MemoryService } from '../memory/memory.service';
import { MemoryTool } from '../memory/memory.tool';
import { RagIndexTool } from '../rag/rag-index.tool';
import { RagIndexer } from '../rag/rag-indexer';
import { RagRepository } from '../rag/rag.repository';
import { RagSearchService } from '../rag/rag-search.service';
import { RagSearchTool } from '../rag/rag-search.tool';
import { SkillTool } from '../skills/skill.tool';
import { SkillsRepository } from '../skills/skills.repository';
import { TodoTool } from '../todos/todo.tool';
import { TodosController } from '../todos/todos.controller';
import { TodosRepository } from '../todos/todos.repository';
import { WEB_PROVIDERS, WEB_TOOLS } from '../web/web.module';
import { GATEWAY_TOOLS, GatewayTool } from './gateway-tool';
import { SandboxFiles } from './sandbox-files';

/** Tools that run in the gateway; the ToolRegistry registers each beside its definition. */
const TOOLS: Array<Type<GatewayTool>> = [MemoryTool, SessionSearchTool, RagIndexTool, RagSearchTool, TodoTool, SkillTool, ...WEB_TOOLS];

/** Everything the gateway-side tools need, for the gateway module's providers. */
export const GATEWAY_TOOL_PROVIDERS: Provider[] = [
  { provide: EMBEDDINGS_PROVIDER, inject: [RUNBOX_CONFIG], useFactory: createEmbeddingsProvider },
  SandboxFiles,
  MemoryRepository,
  MemoryService,
  HistoryRepository,
  RagRepository,
  RagIndexer,
  RagSearchService,
  TodosRepository,
  SkillsRepository,
  ...WEB_PROVIDERS,
  ...TOOLS,
  { provide: GATEWAY_TOOLS, inject: TOOLS, useFactory: (...tools: GatewayTool[]) => tools },
];

/** Their HTTP routes: /v1/memory and /v1/sessions/{id}/todos. */
export const GATEWAY_TOOL_CONTROLLERS = [MemoryController, TodosController];
