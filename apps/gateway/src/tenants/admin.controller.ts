import { Controller, Delete, Get, HttpCode, Patch, Post, UseGuards } from '@nestjs/common';
import { z } from 'zod';
import { AdminGuard } from '../auth/admin.guard';
import { PathId, ValidBody } from '../common/validation/request-parts';
import { ApiKeyView, TenantView } from './tenants.repository';
import { createApiKeySchema, createTenantSchema, updateTenantSchema } from './tenants.schemas';
import { TenantsService } from './tenants.service';

@Controller('v1/admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(private readonly tenants: TenantsService) {}

  @Post('tenants')
  async createTenant(@ValidBody(createTenantSchema) input: z.output<typeof createTenantSchema>) {
    return tenantJson(await this.tenants.create(input.name, input.limits));
  }

  @Get('tenants/:id')
  async getTenant(@PathId('tenant') tenantId: string) {
    return tenantJson(await this.tenants.get(tenantId));
  }

  /** Changes limits; they apply to the next session, run or sandbox the tenant creates. */
  @Patch('tenants/:id')
  async updateTenant(@PathId('tenant') tenantId: string, @ValidBody(updateTenantSchema) input: z.output<typeof updateTenantSchema>) {
    return tenantJson(await this.tenants.updateLimits(tenantId, input.limits));
  }

  @Get('tenants/:id/api_keys')
  async listKeys(@PathId('tenant') tenantId: string) {
    const keys = await this.tenants.listKeys(tenantId);
    return { data: keys.map(apiKeyJson) };
  }

  @Post('tenants/:id/api_keys')
  async createKey(
    @PathId('tenant') tenantId: string,
    @ValidBody(createApiKeySchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createApiKeySchema>,
  ) {
    const key = await this.tenants.issueKey(tenantId, input.name);
    return { id: key.id, key: key.key, prefix: key.prefix };
  }

  @Delete('api_keys/:id')
  @HttpCode(204)
  async revokeKey(@PathId('api key') keyId: string): Promise<void> {
    await this.tenants.revokeKey(keyId);
  }
}

function tenantJson(t: TenantView) {
  return { id: t.id, name: t.name, limits: t.limits, created_at: t.createdAt.toISOString() };
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
