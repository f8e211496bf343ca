import { Injectable } from '@nestjs/common';
import { DomainRules, NO_DOMAIN_RULES, readTenantEgressRules } from '@app/egress';
import { PrismaService } from '@app/persistence';

/** A tenant's egress domain rules (table tenant_egress_rules, under row-level security). */
@Injectable()
export class EgressRulesRepository {
  constructor(private readonly db: PrismaService) {}

  /** The rules outbound tools apply for the tenant; none set means no domain rules. */
  forTenant(tenantId: string): Promise<DomainRules> {
    return readTenantEgressRules(this.db, tenantId);
  }

  /** Admin: replaces the tenant's rules (the admin API checked that the tenant exists). */
  async set(tenantId: string, rules: DomainRules): Promise<DomainRules> {
    const row = await this.db.system((tx) =>
      tx.tenantEgressRules.upsert({
        where: { tenantId },
        create: { tenantId, allow: rules.allow, deny: rules.deny },
        update: { allow: rules.allow, deny: rules.deny },
      }),
    );
    return { allow: row.allow, deny: row.deny };
  }

  /** Admin: the rules as stored, for GET /v1/admin/tenants/{id}. */
  async get(tenantId: string): Promise<DomainRules> {
    const row = await this.db.system((tx) => tx.tenantEgressRules.findUnique({ where: { tenantId } }));
    return row ? { allow: row.allow, deny: row.deny } : NO_DOMAIN_RULES;
  }
}
