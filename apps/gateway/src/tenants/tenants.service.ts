import { Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { AuthService } from '../auth/auth.service';
import { generateApiKey } from './api-key';
import { TenantsRepository, TenantView } from './tenants.repository';

@Injectable()
export class TenantsService {
  constructor(
    private readonly tenants: TenantsRepository,
    private readonly auth: AuthService,
  ) {}

  async create(name: string, limits: Record<string, unknown> = {}): Promise<TenantView> {
    const tenant = await this.tenants.create(name, limits);
    if (tenant === 'exists') throw new AppError(ErrorCode.Conflict, `a tenant named ${JSON.stringify(name)} already exists`);
    return tenant;
  }

  /** Issues a key. The plaintext is returned once and never stored. */
  async issueKey(tenantId: string, name?: string): Promise<{ id: string; key: string; prefix: string }> {
    if (!(await this.tenants.findById(tenantId))) throw AppError.notFound('tenant', tenantId);
    const { key, prefix, hash } = generateApiKey();
    const { id } = await this.tenants.addKey(tenantId, name, prefix, hash);
    return { id, key, prefix };
  }

  async revokeKey(id: string): Promise<void> {
    const record = await this.tenants.revokeKey(id);
    if (!record) throw AppError.notFound('api key', id);
    this.auth.clearCache();
  }
}
