import { Controller, Delete, Get, HttpCode, Patch, Post, UseGuards } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody } from '../common/validation/request-parts';
import { serverListSchema, serverSchema } from './servers.responses';
import { createServerSchema, repinSchema, updateServerSchema } from './servers.schemas';
import { ServersService } from './servers.service';

/** The tenant's saved SSH servers. Credentials go in and are never given back. */
@Controller('v1/servers')
@UseGuards(ApiKeyGuard)
export class ServersController {
  constructor(private readonly servers: ServersService) {}

  @Post()
  @ApiOperation({ summary: 'Add a saved SSH server', response: serverSchema, errors: [ErrorCode.Conflict] })
  async create(@TenantId() tenantId: string, @ValidBody(createServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createServerSchema>) {
    return this.servers.create(tenantId, input);
  }

  @Get()
  @ApiOperation({ summary: "List the tenant's saved SSH servers", response: serverListSchema })
  async list(@TenantId() tenantId: string) {
    return { data: await this.servers.list(tenantId) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a saved SSH server', response: serverSchema })
  async get(@TenantId() tenantId: string, @PathId('server') serverId: string) {
    return this.servers.get(tenantId, serverId);
  }

  @Patch(':id')
  @ApiOperation({ summary: 'Change a saved SSH server', response: serverSchema, errors: [ErrorCode.Conflict] })
  async update(
    @TenantId() tenantId: string,
    @PathId('server') serverId: string,
    @ValidBody(updateServerSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof updateServerSchema>,
  ) {
    return this.servers.update(tenantId, serverId, input);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a saved SSH server' })
  async delete(@TenantId() tenantId: string, @PathId('server') serverId: string): Promise<void> {
    await this.servers.delete(tenantId, serverId);
  }

  /** Replaces the pinned host key after the tenant checked the new one (or clears it: pinned again on next connect). */
  @Post(':id/repin')
  @HttpCode(200)
  @ApiOperation({ summary: "Replace a saved server's pinned host key (or clear it)", response: serverSchema })
  async repin(
    @TenantId() tenantId: string,
    @PathId('server') serverId: string,
    @ValidBody(repinSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof repinSchema>,
  ) {
    return this.servers.repin(tenantId, serverId, input.fingerprint);
  }
}
