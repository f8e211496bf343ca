/**
 * How a gateway shares its run workers between tenants. Pure: the inputs come from
 * Postgres (who holds workers now, deployment-wide) and from the replica's own pool.
 *
 * A replica keeps its last few free workers (the reserve) for tenants that hold less than
 * their fair share. A tenant alone may fill the rest of the pool, so no worker idles while
 * only one tenant has work; when a second tenant's run arrives, a reserved worker is free
 * for it at once instead of after one of the first tenant's runs ends. As runs end, the
 * freed workers go to tenants below their share before those above it.
 */

/** Workers held at one moment across every gateway replica, from the runs' live leases. */
export interface WorkerHolds {
  /** Tenant id → runs of that tenant a worker holds now. */
  byTenant: ReadonlyMap<string, number>;
  /** Gateway replicas holding at least one run now. */
  replicas: number;
}

/** Free workers a replica keeps for tenants below their share: an eighth of the pool, at least one (none for a pool of one). */
export function reservedWorkers(workers: number): number {
  return workers < 2 ? 0 : Math.max(1, Math.floor(workers / 8));
}

/**
 * A tenant's fair share: the workers outside the reserve, on every replica that holds runs
 * (replicas are assumed to have the same pool size), split evenly between the tenants that
 * hold workers now and this one. Never less than one.
 */
export function fairShare(tenantId: string, holds: WorkerHolds, workers: number): number {
  const tenants = new Set(holds.byTenant.keys()).add(tenantId).size;
  const capacity = (workers - reservedWorkers(workers)) * Math.max(1, holds.replicas);
  return Math.max(1, Math.floor(capacity / tenants));
}

/** Whether taking a worker now would leave fewer free than the reserve. */
export function takesFromReserve(freeAfter: number, workers: number): boolean {
  return freeAfter < reservedWorkers(workers);
}

/** Whether the tenant holds fewer workers than its fair share, so a reserved worker may go to it. */
export function belowFairShare(tenantId: string, holds: WorkerHolds, workers: number): boolean {
  return (holds.byTenant.get(tenantId) ?? 0) < fairShare(tenantId, holds, workers);
}
