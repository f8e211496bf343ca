import { domainRulesSchema } from '@app/egress';
import { z } from 'zod';
import { tenantLimitsPatchSchema, tenantLimitsSchema } from '../quotas/tenant-limits';

export { tenantLimitsSchema };

export const createTenantSchema = z
  .object({
    name: z.string().trim().min(1).max(100).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, . _ -'),
    limits: tenantLimitsSchema.optional(),
  })
  .strict();

export const updateTenantSchema = z
  .object({ limits: tenantLimitsPatchSchema.optional(), egress: domainRulesSchema.optional() })
  .strict()
  .refine((b) => b.limits !== undefined || b.egress !== undefined, 'give limits, egress or both');

export const createApiKeySchema = z.object({ name: z.string().trim().min(1).max(100).optional() }).strict();

export { noQuerySchema } from '../common/metadata';
