import { PrismaService } from '@app/persistence';
import { DomainRules, NO_DOMAIN_RULES } from './domain-rules';

/**
 * A tenant's egress domain rules (`PATCH /v1/admin/tenants/{id}` with `egress`), as every
 * outbound tool applies them: web_fetch and the browser in the gateway, vps_run there too,
 * SFTP transfers in the executor. Read for each connection, so a change applies to the next
 * one. No rules stored means none (any public host).
 */
export async function readTenantEgressRules(db: PrismaService, tenantId: string): Promise<DomainRules> {
  const row = await db.tenant(tenantId, (tx) => tx.tenantEgressRules.findUnique({ where: { tenantId } }));
  return row ? { allow: row.allow, deny: row.deny } : NO_DOMAIN_RULES;
}
