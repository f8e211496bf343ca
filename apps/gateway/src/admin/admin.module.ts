import { Module } from '@nestjs/common';
import { TenancyModule } from '../tenants/tenancy.module';
import { AdminController } from './admin.controller';

/**
 * The operator's API (/v1/admin): tenants, their keys, limits and saved run defaults. It sits
 * above tenancy and runs, since a tenant's saved defaults are validated as run options.
 */
@Module({
  imports: [TenancyModule],
  controllers: [AdminController],
})
export class AdminModule {}
