/** Labels on every container and volume the executor makes, so it can always find its own. */
export const LABEL = {
  managed: 'runbox.managed',
  executor: 'runbox.executor',
  session: 'runbox.session',
  tenant: 'runbox.tenant',
  /** Set on warm-pool containers until one is handed to a session. */
  pool: 'runbox.pool',
} as const;
