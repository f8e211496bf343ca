import { Module } from '@nestjs/common';
import { AdminGuard } from '../auth/admin.guard';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { ApiKeyStore } from '../auth/api-key-store';
import { AuthService } from '../auth/auth.service';
import { QuotasRepository } from '../quotas/quotas.repository';
import { QuotasService } from '../quotas/quotas.service';
import { TenantsRepository } from './tenants.repository';
import { TenantsService } from './tenants.service';

/**
 * Tenants, their API keys and quotas: authentication (the guards every feature's
 * controllers use), the tenant and key records the admin API manages, and the quota checks runs and sessions are admitted by.
 */
@Module({
  providers: [
    TenantsRepository,
    { provide: ApiKeyStore, useExisting: TenantsRepository },
    AuthService,
    ApiKeyGuard,
    AdminGuard,
    TenantsService,
    QuotasRepository,
    QuotasService,
  ],
  exports: [AuthService, ApiKeyGuard, AdminGuard, QuotasService, TenantsService],
})
export class TenancyModule {}
