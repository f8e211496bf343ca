import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { pathId } from '../common/ids';
import { noQuerySchema } from '../common/metadata';
import { TenantId } from '../common/request-context';
import { validate } from '../common/validate';
import { createServerSchema, repinSchema, updateServerSchema } from './servers.schemas';
import { ServersService } from './servers.service';

/** The tenant's saved SSH servers. Credentials go in and are never given back. */
@Controller('v1/servers')
@UseGuards(ApiKeyGuard)
export class ServersController {
  constructor(private readonly servers: ServersService) {}

  @Post()
  async create(@TenantId() tenantId: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return this.servers.create(tenantId, validate(createServerSchema, body ?? {}, 'body'));
  }

  @Get()
  async list(@TenantId() tenantId: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return { data: await this.servers.list(tenantId) };
  }

  @Get(':id')
  async get(@TenantId() tenantId: string, @Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return this.servers.get(tenantId, pathId('server', id));
  }

  @Patch(':id')
  async update(@TenantId() tenantId: string, @Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const serverId = pathId('server', id);
    return this.servers.update(tenantId, serverId, validate(updateServerSchema, body ?? {}, 'body'));
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@TenantId() tenantId: string, @Param('id') id: string, @Query() query: unknown): Promise<void> {
    validate(noQuerySchema, query, 'query');
    await this.servers.delete(tenantId, pathId('server', id));
  }

  /** Replaces the pinned host key after the tenant checked the new one (or clears it: pinned again on next connect). */
  @Post(':id/repin')
  @HttpCode(200)
  async repin(@TenantId() tenantId: string, @Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const serverId = pathId('server', id);
    const { fingerprint } = validate(repinSchema, body ?? {}, 'body');
    return this.servers.repin(tenantId, serverId, fingerprint);
  }
}
