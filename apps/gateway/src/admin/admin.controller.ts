import { Controller, Delete, Get, HttpCode, Patch, Post, UseGuards } from '@nestjs/common';
import { z } from 'zod';
import { DomainRules } from '@app/egress';
import { AppError, ErrorCode } from '@app/errors';
import { ApiOperation } from '../api-docs/api-operation';
import { AdminGuard } from '../auth/admin.guard';
import { PathId, ValidBody, ValidQuery } from '../common/validation/request-parts';
import { ApiKeyView, TenantView } from '../tenants/tenants.repository';
import { apiKeyListSchema, apiKeySchema, issuedKeySchema, tenantListSchema, tenantSchema } from './admin.responses';
import { createApiKeySchema, createTenantSchema, listTenantsQuerySchema, updateApiKeySchema, updateTenantSchema } from './admin.schemas';
import { TenantsService } from '../tenants/tenants.service';
import { ToolRegistry } from '../tools/tool-registry';
import { EgressRulesRepository } from '../web/egress-rules.repository';

@Controller('v1/admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(
    private readonly tenants: TenantsService,
    private readonly egress: EgressRulesRepository,
    private readonly registry: ToolRegistry,
  ) {}

  @Post('tenants')
  @ApiOperation({ summary: 'Create a tenant', response: tenantSchema, errors: [ErrorCode.Conflict] })
  async createTenant(@ValidBody(createTenantSchema) input: z.output<typeof createTenantSchema>) {
    return tenantJson(await this.tenants.create(input.name, input.limits));
  }

  /** Newest first, without egress rules (read one tenant for those). */
  @Get('tenants')
  @ApiOperation({ summary: 'List tenants, newest first (without egress rules)', response: tenantListSchema })
  async listTenants(@ValidQuery(listTenantsQuerySchema) q: z.output<typeof listTenantsQuerySchema>) {
    const tenants = await this.tenants.list(q.limit);
    return { data: tenants.map((t) => tenantJson(t)) };
  }

  @Get('tenants/:id')
  @ApiOperation({ summary: 'Get a tenant with its limits, run defaults and egress rules', response: tenantSchema })
  async getTenant(@PathId('tenant') tenantId: string) {
    const tenant = await this.tenants.get(tenantId);
    return tenantJson(tenant, await this.egress.get(tenant.id));
  }

  /**
   * Changes limits, the saved run defaults, the egress rules (`egress` replaces both lists)
   * the tools that need approval (`approval_required` replaces the list) and/or whether the
   * browser may run script in pages (`browser_evaluate`). Limits, defaults and approval tools
   * apply to the next session, run or sandbox the tenant creates; egress rules and
   * browser_evaluate to the next call.
   */
  @Patch('tenants/:id')
  @ApiOperation({ summary: "Change a tenant's limits, run defaults, egress rules, approval list or browser_evaluate", response: tenantSchema })
  async updateTenant(@PathId('tenant') tenantId: string, @ValidBody(updateTenantSchema) input: z.output<typeof updateTenantSchema>) {
    if (input.approval_required) this.checkToolNames(input.approval_required);
    let tenant = await this.tenants.get(tenantId);
    if (input.limits !== undefined) tenant = await this.tenants.updateLimits(tenantId, input.limits);
    if (input.run_defaults !== undefined) tenant = await this.tenants.setRunDefaults(tenantId, input.run_defaults);
    if (input.approval_required !== undefined) tenant = await this.tenants.setApprovalRequired(tenantId, [...new Set(input.approval_required)].sort());
    if (input.browser_evaluate !== undefined) tenant = await this.tenants.setBrowserEvaluate(tenantId, input.browser_evaluate);
    const egress = input.egress ? await this.egress.set(tenantId, input.egress) : await this.egress.get(tenantId);
    return tenantJson(tenant, egress);
  }

  /** A name that is no tool would protect nothing, and a typo there should not pass silently. */
  private checkToolNames(names: readonly string[]): void {
    const known = new Set(this.registry.names());
    const unknown = names.filter((name) => !known.has(name));
    if (unknown.length > 0) {
      throw AppError.validation(`approval_required names unknown tools: ${unknown.join(', ')}`, { field: 'approval_required', unknown });
    }
  }

  /** Sets (or, with null, clears) the defaults of runs made with this key, over the tenant's. */
  @Patch('api_keys/:id')
  @ApiOperation({ summary: 'Set (or clear with null) the run defaults of an API key', response: apiKeySchema })
  async updateKey(@PathId('api key') keyId: string, @ValidBody(updateApiKeySchema) input: z.output<typeof updateApiKeySchema>) {
    return apiKeyJson(await this.tenants.setKeyRunDefaults(keyId, input.run_defaults));
  }

  @Get('tenants/:id/api_keys')
  @ApiOperation({ summary: "List a tenant's API keys (never the keys themselves)", response: apiKeyListSchema })
  async listKeys(@PathId('tenant') tenantId: string) {
    const keys = await this.tenants.listKeys(tenantId);
    return { data: keys.map(apiKeyJson) };
  }

  @Post('tenants/:id/api_keys')
  @ApiOperation({ summary: 'Issue an API key for a tenant; the key is shown once', response: issuedKeySchema })
  async createKey(
    @PathId('tenant') tenantId: string,
    @ValidBody(createApiKeySchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createApiKeySchema>,
  ) {
    const key = await this.tenants.issueKey(tenantId, input.name);
    return { id: key.id, key: key.key, prefix: key.prefix };
  }

  @Delete('api_keys/:id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key' })
  async revokeKey(@PathId('api key') keyId: string): Promise<void> {
    await this.tenants.revokeKey(keyId);
  }
}

function tenantJson(t: TenantView, egress?: DomainRules): z.output<typeof tenantSchema> {
  return {
    id: t.id,
    name: t.name,
    limits: t.limits,
    run_defaults: t.runDefaults,
    approval_required: t.approvalRequired,
    browser_evaluate: t.browserEvaluate,
    ...(egress ? { egress } : {}),
    created_at: t.createdAt.toISOString(),
  };
}

function apiKeyJson(k: ApiKeyView): z.output<typeof apiKeySchema> {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    run_defaults: k.runDefaults,
    created_at: k.createdAt.toISOString(),
    revoked_at: k.revokedAt?.toISOString() ?? null,
  };
}
