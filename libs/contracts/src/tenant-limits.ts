import { z } from 'zod';

const limit = z.number().int().min(0).max(1_000_000);

/**
 * A tenant's limits as stored in `tenants.limits` and as the admin API accepts them; an
 * absent limit is no limit. The gateway writes them and both services read them, so both
 * read them with this one schema.
 */
export const tenantLimitsSchema = z
  .object({
    max_concurrent_runs: limit.optional(),
    max_sessions: limit.optional(),
    max_sandboxes: limit.optional(),
    runs_per_minute: limit.optional(),
  })
  .strict();
export type TenantLimits = z.infer<typeof tenantLimitsSchema>;

/** PATCH: a number sets a limit, null removes it, an absent key leaves it as it is. */
export const tenantLimitsPatchSchema = z
  .object({
    max_concurrent_runs: limit.nullable().optional(),
    max_sessions: limit.nullable().optional(),
    max_sandboxes: limit.nullable().optional(),
    runs_per_minute: limit.nullable().optional(),
  })
  .strict();
export type TenantLimitsPatch = z.infer<typeof tenantLimitsPatchSchema>;

/** Reads the stored JSON leniently: anything that is not a valid limit counts as none. */
export function parseStoredLimits(value: unknown): TenantLimits {
  const out: TenantLimits = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const name of Object.keys(tenantLimitsSchema.shape) as Array<keyof TenantLimits>) {
    const parsed = limit.safeParse((value as Record<string, unknown>)[name]);
    if (parsed.success) out[name] = parsed.data;
  }
  return out;
}
