import { Body, Controller, Delete, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { AdminGuard } from '../auth/admin.guard';
import { pathId } from '../common/ids';
import { validate } from '../common/validate';
import { createApiKeySchema, createTenantSchema } from './tenants.schemas';
import { TenantsService } from './tenants.service';

@Controller('v1/admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(private readonly tenants: TenantsService) {}

  @Post('tenants')
  async createTenant(@Body() body: unknown) {
    const input = validate(createTenantSchema, body, 'body');
    const tenant = await this.tenants.create(input.name, input.limits);
    return { id: tenant.id, name: tenant.name, limits: tenant.limits, created_at: tenant.createdAt.toISOString() };
  }

  @Post('tenants/:id/api_keys')
  async createKey(@Param('id') id: string, @Body() body: unknown) {
    const input = validate(createApiKeySchema, body ?? {}, 'body');
    const key = await this.tenants.issueKey(pathId('tenant', id), input.name);
    return { id: key.id, key: key.key, prefix: key.prefix };
  }

  @Delete('api_keys/:id')
  @HttpCode(204)
  async revokeKey(@Param('id') id: string): Promise<void> {
    await this.tenants.revokeKey(pathId('api key', id));
  }
}
