import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { tenantToolSourceProviders } from '../tools/tenant-tool';
import { ToolsModule } from '../tools/tools.module';
import { WebModule } from '../web/web.module';
import { OpenApiServicesController } from './openapi-services.controller';
import { OpenApiServicesRepository } from './openapi-services.repository';
import { OpenApiServicesService } from './openapi-services.service';
import { OpenApiToolSource } from './openapi-tool-source';
import { OperationCaller } from './operation-caller';

/**
 * OpenAPI services as tools: /v1/openapi_services, and the tool source that offers each
 * stored operation to the tenant's runs, calling it through the web feature's egress guard.
 */
@Module({
  imports: [TenancyModule, ToolsModule, WebModule],
  controllers: [OpenApiServicesController],
  providers: [OpenApiServicesRepository, OpenApiServicesService, OperationCaller, ...tenantToolSourceProviders(OpenApiToolSource)],
})
export class OpenApiModule {}
