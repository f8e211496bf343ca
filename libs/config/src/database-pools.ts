import { RunboxConfig } from './config.schema';

/** An executor runs no run workers: its tenant work is sandbox rows, a few at a time. */
const EXECUTOR_TENANT_POOL = 10;
/** Connections a gateway keeps beyond its workers' share: run creation, event streams, reads. */
const GATEWAY_REQUEST_CONNECTIONS = 4;

/**
 * The pools' sizes for a service. A gateway's run workers are its largest users of tenant
 * connections, but a run holds one only during a transaction, a few milliseconds between
 * model calls and tool calls: half the workers in a transaction at the same moment is a
 * burst of new runs, not the steady state. Past the pool, work waits for a connection
 * (docs/operations.md, "Connection pools").
 */
export function databasePoolSizes(config: RunboxConfig, service: 'gateway' | 'executor'): { tenant: number; system: number } {
  const sized = service === 'gateway' ? Math.ceil(config.RUNBOX_RUN_WORKERS / 2) + GATEWAY_REQUEST_CONNECTIONS : EXECUTOR_TENANT_POOL;
  return { tenant: config.DATABASE_POOL_SIZE ?? sized, system: config.DATABASE_SYSTEM_POOL_SIZE };
}
