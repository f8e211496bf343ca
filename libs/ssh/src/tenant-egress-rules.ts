import { DomainRules, NO_DOMAIN_RULES } from '@app/egress';

/**
 * The domain rules a tenant's outbound SSH connections are checked against, in the gateway
 * (vps_run) and the executor (transfers). Tenants' `egress: {allow, deny}` settings are not
 * stored yet; until they are, every tenant gets the empty rules (any public host), and this
 * is the one place to read them from once they are.
 */
export function tenantEgressRules(_tenantId: string): Promise<DomainRules> {
  return Promise.resolve(NO_DOMAIN_RULES);
}
