import { Module } from '@nestjs/common';
import { RUNBOX_CONFIG } from '@app/config';
import { createEmbeddingsProvider, EMBEDDINGS_PROVIDER } from '../embeddings/embeddings.provider';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { ToolsModule } from '../tools/tools.module';
import { RagIndexTool } from './rag-index.tool';
import { RagIndexer } from './rag-indexer';
import { RagSearchService } from './rag-search.service';
import { RagSearchTool } from './rag-search.tool';
import { RagRepository } from './rag.repository';

/** Retrieval over the session's workspace: rag_index reads it through the sandbox, rag_search finds in it. */
@Module({
  imports: [ToolsModule],
  providers: [
    { provide: EMBEDDINGS_PROVIDER, inject: [RUNBOX_CONFIG], useFactory: createEmbeddingsProvider },
    RagRepository,
    RagIndexer,
    RagSearchService,
    ...gatewayToolProviders(RagIndexTool, RagSearchTool),
  ],
})
export class RetrievalModule {}
