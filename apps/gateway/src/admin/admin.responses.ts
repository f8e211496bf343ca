import { domainRulesSchema } from '@app/egress';
import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';
import { tenantLimitsSchema } from '../quotas/tenant-limits';
import { runDefaultsSchema } from '../runs/run-defaults';

const savedRunDefaults = runDefaultsSchema.nullable().describe('defaults for the runs made under it; null when none are saved');

export const tenantSchema = z.object({
  id: z.string(),
  name: z.string(),
  limits: tenantLimitsSchema,
  run_defaults: savedRunDefaults,
  approval_required: z.array(z.string()),
  browser_evaluate: z.boolean(),
  egress: domainRulesSchema.optional().describe('the egress rules (answered by GET and PATCH)'),
  created_at: timestamp(),
}).meta({ id: 'Tenant' });

export const tenantListSchema = listOf(tenantSchema);

export const apiKeySchema = z.object({
  id: z.string(),
  name: z.string().nullable(),
  prefix: z.string(),
  run_defaults: savedRunDefaults,
  created_at: timestamp(),
  revoked_at: timestamp().nullable(),
}).meta({ id: 'ApiKey' });
export const apiKeyListSchema = listOf(apiKeySchema);

export const issuedKeySchema = z.object({ id: z.string(), key: z.string().describe('the key itself: shown this once'), prefix: z.string() });
