import { Controller, Delete, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody } from '../common/validation/request-parts';
import { createdOpenApiServiceSchema, openApiServiceListSchema, openApiServiceSchema } from './openapi-services.responses';
import { createServiceSchema } from './openapi-services.schemas';
import { OpenApiServicesService } from './openapi-services.service';

/** The tenant's OpenAPI services, each operation a tool. Credentials go in and are never given back. */
@Controller('v1/openapi_services')
@UseGuards(ApiKeyGuard)
export class OpenApiServicesController {
  constructor(private readonly services: OpenApiServicesService) {}

  @Post()
  @ApiOperation({ summary: 'Add an OpenAPI service from its document: each operation becomes a tool', response: createdOpenApiServiceSchema, errors: [ErrorCode.Conflict] })
  async create(@TenantId() tenantId: string, @ValidBody(createServiceSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createServiceSchema>) {
    return this.services.create(tenantId, input);
  }

  @Get()
  @ApiOperation({ summary: "List the tenant's OpenAPI services", response: openApiServiceListSchema })
  async list(@TenantId() tenantId: string) {
    return { data: await this.services.list(tenantId) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get an OpenAPI service', response: openApiServiceSchema })
  async get(@TenantId() tenantId: string, @PathId('openapi service') id: string) {
    return this.services.get(tenantId, id);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete an OpenAPI service' })
  async delete(@TenantId() tenantId: string, @PathId('openapi service') id: string): Promise<void> {
    await this.services.delete(tenantId, id);
  }
}
