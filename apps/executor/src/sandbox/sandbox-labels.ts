/** Labels on every container and volume the executor makes, so it can always find its own. */
export const LABEL = {
  managed: 'runbox.managed',
  executor: 'runbox.executor',
  session: 'runbox.session',
  tenant: 'runbox.tenant',
  /**
   * Set on every container made for the warm pool, and kept for its life: Docker labels cannot
   * change, so a handed-out pool container still carries it (its session is in the row).
   */
  pool: 'runbox.pool',
} as const;
