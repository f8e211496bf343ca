import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { MemoryController } from './memory.controller';
import { MemoryRepository } from './memory.repository';
import { MemoryService } from './memory.service';
import { MemoryTool } from './memory.tool';

/** Long-term memory: the memory tool and /v1/memory. */
@Module({
  imports: [TenancyModule],
  controllers: [MemoryController],
  providers: [MemoryRepository, MemoryService, ...gatewayToolProviders(MemoryTool)],
})
export class MemoryModule {}
