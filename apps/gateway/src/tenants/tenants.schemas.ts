import { z } from 'zod';

export const tenantLimitsSchema = z
  .object({
    max_concurrent_runs: z.number().int().min(0).max(1_000_000).optional(),
    max_sessions: z.number().int().min(0).max(1_000_000).optional(),
    max_sandboxes: z.number().int().min(0).max(1_000_000).optional(),
    runs_per_minute: z.number().int().min(0).max(1_000_000).optional(),
  })
  .strict();

export const createTenantSchema = z
  .object({
    name: z.string().trim().min(1).max(100).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, . _ -'),
    limits: tenantLimitsSchema.optional(),
  })
  .strict();

export const createApiKeySchema = z.object({ name: z.string().trim().min(1).max(100).optional() }).strict();
