import { Module } from '@nestjs/common';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { HistoryRepository } from './history.repository';
import { SessionSearchTool } from './session-search.tool';

/** Search over the tenant's past conversations: the session_search tool. */
@Module({
  providers: [HistoryRepository, ...gatewayToolProviders(SessionSearchTool)],
})
export class HistoryModule {}
