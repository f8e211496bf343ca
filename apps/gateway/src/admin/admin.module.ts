import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { ToolsModule } from '../tools/tools.module';
import { WebModule } from '../web/web.module';
import { AdminController } from './admin.controller';

/**
 * The operator's API (/v1/admin): tenants, their keys, limits, saved run defaults and egress rules. It sits
 * above tenancy and runs, since a tenant's saved defaults are validated as run options.
 */
@Module({
  imports: [TenancyModule, ToolsModule, WebModule],
  controllers: [AdminController],
})
export class AdminModule {}
