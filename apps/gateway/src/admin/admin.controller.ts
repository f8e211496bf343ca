import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { AdminGuard } from '../auth/admin.guard';
import { pathId } from '../common/ids';
import { validate } from '../common/validate';
import { ApiKeyView, TenantView } from '../tenants/tenants.repository';
import { createApiKeySchema, createTenantSchema, noQuerySchema, updateApiKeySchema, updateTenantSchema } from './admin.schemas';
import { TenantsService } from '../tenants/tenants.service';

@Controller('v1/admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(private readonly tenants: TenantsService) {}

  @Post('tenants')
  async createTenant(@Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const input = validate(createTenantSchema, body, 'body');
    return tenantJson(await this.tenants.create(input.name, input.limits));
  }

  @Get('tenants/:id')
  async getTenant(@Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    return tenantJson(await this.tenants.get(pathId('tenant', id)));
  }

  /**
   * Changes limits and/or the saved run defaults; they apply to the next session, run or
   * sandbox the tenant creates.
   */
  @Patch('tenants/:id')
  async updateTenant(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const tenantId = pathId('tenant', id);
    const input = validate(updateTenantSchema, body, 'body');
    let tenant = await this.tenants.get(tenantId);
    if (input.limits !== undefined) tenant = await this.tenants.updateLimits(tenantId, input.limits);
    if (input.run_defaults !== undefined) tenant = await this.tenants.setRunDefaults(tenantId, input.run_defaults);
    return tenantJson(tenant);
  }

  /** Sets (or, with null, clears) the defaults of runs made with this key, over the tenant's. */
  @Patch('api_keys/:id')
  async updateKey(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const keyId = pathId('api key', id);
    const input = validate(updateApiKeySchema, body, 'body');
    return apiKeyJson(await this.tenants.setKeyRunDefaults(keyId, input.run_defaults));
  }

  @Get('tenants/:id/api_keys')
  async listKeys(@Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const keys = await this.tenants.listKeys(pathId('tenant', id));
    return { data: keys.map(apiKeyJson) };
  }

  @Post('tenants/:id/api_keys')
  async createKey(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const tenantId = pathId('tenant', id);
    const input = validate(createApiKeySchema, body ?? {}, 'body');
    const key = await this.tenants.issueKey(tenantId, input.name);
    return { id: key.id, key: key.key, prefix: key.prefix };
  }

  @Delete('api_keys/:id')
  @HttpCode(204)
  async revokeKey(@Param('id') id: string, @Query() query: unknown): Promise<void> {
    validate(noQuerySchema, query, 'query');
    await this.tenants.revokeKey(pathId('api key', id));
  }
}

function tenantJson(t: TenantView) {
  return { id: t.id, name: t.name, limits: t.limits, run_defaults: t.runDefaults, created_at: t.createdAt.toISOString() };
}

function apiKeyJson(k: ApiKeyView) {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    run_defaults: k.runDefaults,
    created_at: k.createdAt.toISOString(),
    revoked_at: k.revokedAt?.toISOString() ?? null,
  };
}
