import { z } from 'zod';

const limit = z.number().int().min(0).max(1_000_000);

/** A tenant's limits as the admin API accepts them; an absent limit is no limit. */
export const tenantLimitsSchema = z
  .object({
    max_concurrent_runs: limit.optional(),
    max_sessions: limit.optional(),
    max_sandboxes: limit.optional(),
    runs_per_minute: limit.optional(),
  })
  .strict();
export type TenantLimits = z.infer<typeof tenantLimitsSchema>;

/**
 * The limits a new tenant gets for every limit its creation does not name (docs/tenancy.md).
 * Generous for one team's work, small enough that no one tenant can take a deployment's
 * capacity for itself: 16 runs at once is half of one gateway's run workers, and 20
 * sandboxes at the default 1 GiB each is 20 GiB of an executor host.
 */
export const DEFAULT_TENANT_LIMITS: Readonly<Required<TenantLimits>> = {
  max_concurrent_runs: 16,
  max_sessions: 1000,
  max_sandboxes: 20,
  runs_per_minute: 120,
};

/** A new tenant's limits: the defaults, with what its creation named in their place. */
export function limitsForNewTenant(named: TenantLimits = {}): TenantLimits {
  return { ...DEFAULT_TENANT_LIMITS, ...named };
}

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

export function applyLimitsPatch(current: TenantLimits, patch: TenantLimitsPatch): TenantLimits {
  const next: Record<string, number> = { ...current };
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete next[name];
    else if (value !== undefined) next[name] = value;
  }
  return next as TenantLimits;
}

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
