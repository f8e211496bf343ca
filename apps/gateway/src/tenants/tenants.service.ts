import { Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { AuthService } from '../auth/auth.service';
import { generateApiKey } from '../auth/api-key';
import { applyLimitsPatch, limitsForNewTenant, TenantLimits, TenantLimitsPatch } from '../quotas/tenant-limits';
import { ApiKeyView, SavedRunDefaults, TenantsRepository, TenantView } from './tenants.repository';

@Injectable()
export class TenantsService {
  constructor(
    private readonly tenants: TenantsRepository,
    private readonly auth: AuthService,
  ) {}

  /** Creates a tenant with the default limits, or the ones `limits` names in their place. */
  async create(name: string, limits: TenantLimits = {}): Promise<TenantView> {
    const tenant = await this.tenants.create(name, limitsForNewTenant(limits));
    if (tenant === 'exists') throw new AppError(ErrorCode.Conflict, `a tenant named ${JSON.stringify(name)} already exists`);
    return tenant;
  }

  async get(id: string): Promise<TenantView> {
    const tenant = await this.tenants.findById(id);
    if (!tenant) throw AppError.notFound('tenant', id);
    return tenant;
  }

  list(limit: number): Promise<TenantView[]> {
    return this.tenants.list(limit);
  }

  /** Changes some limits: a number sets one, null removes it, others stay as they are. */
  async updateLimits(id: string, patch: TenantLimitsPatch): Promise<TenantView> {
    const tenant = await this.tenants.updateLimits(id, (current) => applyLimitsPatch(current, patch));
    if (!tenant) throw AppError.notFound('tenant', id);
    return tenant;
  }

  /** Replaces the defaults of the tenant's runs (null clears them); they apply to runs created from now on. */
  async setRunDefaults(id: string, defaults: SavedRunDefaults | null): Promise<TenantView> {
    const tenant = await this.tenants.setRunDefaults(id, defaults);
    if (!tenant) throw AppError.notFound('tenant', id);
    return tenant;
  }

  /** Replaces the tools that need approval in the tenant's runs ([] clears them). */
  async setApprovalRequired(id: string, tools: string[]): Promise<TenantView> {
    const tenant = await this.tenants.setApprovalRequired(id, tools);
    if (!tenant) throw AppError.notFound('tenant', id);
    return tenant;
  }

  /** Opens (true) or closes the browser tool's evaluate action to the tenant's runs. */
  async setBrowserEvaluate(id: string, allowed: boolean): Promise<TenantView> {
    const tenant = await this.tenants.setBrowserEvaluate(id, allowed);
    if (!tenant) throw AppError.notFound('tenant', id);
    return tenant;
  }

  /** Replaces the defaults of the runs made with one API key (null clears them). */
  async setKeyRunDefaults(id: string, defaults: SavedRunDefaults | null): Promise<ApiKeyView> {
    const key = await this.tenants.setKeyRunDefaults(id, defaults);
    if (!key) throw AppError.notFound('api key', id);
    return key;
  }

  async listKeys(tenantId: string): Promise<ApiKeyView[]> {
    await this.get(tenantId);
    return this.tenants.listKeys(tenantId);
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
