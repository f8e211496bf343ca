import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { AdminGuard } from '../auth/admin.guard';
import { pathId } from '../common/ids';
import { validate } from '../common/validate';
import { DomainRules } from '@app/egress';
import { EgressRulesRepository } from '../web/egress-rules.repository';
import { ApiKeyView, TenantView } from './tenants.repository';
import { createApiKeySchema, createTenantSchema, noQuerySchema, updateTenantSchema } from './tenants.schemas';
import { TenantsService } from './tenants.service';

@Controller('v1/admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(
    private readonly tenants: TenantsService,
    private readonly egress: EgressRulesRepository,
  ) {}

  @Post('tenants')
  async createTenant(@Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const input = validate(createTenantSchema, body, 'body');
    return tenantJson(await this.tenants.create(input.name, input.limits));
  }

  @Get('tenants/:id')
  async getTenant(@Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const tenant = await this.tenants.get(pathId('tenant', id));
    return tenantJson(tenant, await this.egress.get(tenant.id));
  }

  /**
   * Changes limits (they apply to the next session, run or sandbox the tenant creates) and
   * egress rules (`egress` replaces both lists; they apply to the next outbound request).
   */
  @Patch('tenants/:id')
  async updateTenant(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const tenantId = pathId('tenant', id);
    const input = validate(updateTenantSchema, body, 'body');
    const tenant = input.limits ? await this.tenants.updateLimits(tenantId, input.limits) : await this.tenants.get(tenantId);
    const egress = input.egress ? await this.egress.set(tenantId, input.egress) : await this.egress.get(tenantId);
    return tenantJson(tenant, egress);
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

function tenantJson(t: TenantView, egress?: DomainRules) {
  return { id: t.id, name: t.name, limits: t.limits, ...(egress ? { egress } : {}), created_at: t.createdAt.toISOString() };
}

function apiKeyJson(k: ApiKeyView) {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    created_at: k.createdAt.toISOString(),
    revoked_at: k.revokedAt?.toISOString() ?? null,
  };
}
