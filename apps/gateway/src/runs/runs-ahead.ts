import { Prisma } from '@prisma/client';
import { ACTIVE_STATUSES } from './run-status';

/** A queued run, as SQL: parameters (one run's values) or another row's columns (a sweep's). */
export interface QueuedRunSql {
  tenantId: Prisma.Sql;
  sessionId: Prisma.Sql;
  id: Prisma.Sql;
  createdAt: Prisma.Sql;
}

/**
 * The condition that the `runs` row aliased `alias` goes on ahead of `run`, a queued
 * top-level run: a top-level run of the same session that has not ended, and is either
 * under way (running, or parked for approval) or was queued before it (by time, then id). A
 * queued run waits for every such run. The one rule of the session's order: the start
 * (RunsRepository.start) counts these runs for one run, and the stranded-run sweep leaves
 * alone a queued run that has any.
 */
export function runsAheadSql(alias: string, run: QueuedRunSql): Prisma.Sql {
  const column = (name: string) => Prisma.raw(`${alias}.${name}`);
  return Prisma.sql`${column('tenant_id')} = ${run.tenantId} AND ${column('session_id')} = ${run.sessionId}
       AND ${column('parent_run_id')} IS NULL AND ${column('id')} <> ${run.id}
       AND ${column('status')} IN (${Prisma.join([...ACTIVE_STATUSES])})
       AND (${column('status')} <> 'queued' OR ${column('created_at')} < ${run.createdAt}
            OR (${column('created_at')} = ${run.createdAt} AND ${column('id')} < ${run.id}))`;
}
