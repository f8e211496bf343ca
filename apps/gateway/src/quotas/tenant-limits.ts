import { TenantLimits, TenantLimitsPatch } from '@app/contracts';

export { parseStoredLimits, tenantLimitsPatchSchema, tenantLimitsSchema } from '@app/contracts';
export type { TenantLimits, TenantLimitsPatch } from '@app/contracts';

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

export function applyLimitsPatch(current: TenantLimits, patch: TenantLimitsPatch): TenantLimits {
  const next: Record<string, number> = { ...current };
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete next[name];
    else if (value !== undefined) next[name] = value;
  }
  return next as TenantLimits;
}
