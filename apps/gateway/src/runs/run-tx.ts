import { RunEventType } from '@app/contracts';
import { prismaSqlTx, SqlTx, Tx } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { RunStatus } from './run-status';

export interface NewEvent {
  /** One of the types the API document describes (libs/contracts run-event-types). */
  type: RunEventType;
  data: Record<string, unknown>;
}

export interface LockedRun {
  status: RunStatus;
  sessionId: string;
  parentRunId: string | null;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  startedAt: Date | null;
  now: Date;
}

/** Whether another worker than `owner` holds a claim on the run that has not lapsed (as of the row's read). */
export function heldByAnother(lease: Pick<LockedRun, 'leaseOwner' | 'leaseExpiresAt' | 'now'>, owner: string): boolean {
  return lease.leaseOwner !== null && lease.leaseOwner !== owner && lease.leaseExpiresAt !== null && lease.leaseExpiresAt > lease.now;
}

/**
 * Locks the run's row for the rest of the transaction. Every change to a run's state, its
 * tool calls, its messages and its events takes this lock first, so writers on different
 * replicas (the worker, a cancel, an approval) never interleave: event numbers stay
 * gap-free and nothing is written after the run's terminal event.
 */
export function lockRun(tx: Tx, tenantId: string, runId: string): Promise<LockedRun | null> {
  return lockRunSql(prismaSqlTx(tx), tenantId, runId);
}

/** lockRun in a raw SQL transaction (PrismaService.tenantSql). */
export async function lockRunSql(sql: SqlTx, tenantId: string, runId: string): Promise<LockedRun | null> {
  const rows = await sql.query<{ status: string; session_id: string; parent_run_id: string | null; lease_owner: string | null; lease_expires_at: Date | null; started_at: Date | null; now: Date }>(
    Prisma.sql`SELECT status, session_id, parent_run_id, lease_owner, lease_expires_at, started_at, now() AS now
                 FROM runs WHERE id = ${runId} AND tenant_id = ${tenantId} FOR UPDATE`,
  );
  const row = rows[0];
  if (!row) return null;
  return {
    status: row.status as RunStatus,
    sessionId: row.session_id,
    parentRunId: row.parent_run_id,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: row.lease_expires_at,
    startedAt: row.started_at,
    now: row.now,
  };
}

/** Appends events after the run's last one; the caller holds the run's lock. Returns their numbers. */
export async function appendEventsTx(tx: Tx, tenantId: string, runId: string, events: NewEvent[]): Promise<number[]> {
  if (events.length === 0) return [];
  const last = await tx.runEvent.findFirst({ where: { runId, tenantId }, orderBy: { seq: 'desc' }, select: { seq: true } });
  const first = (last?.seq ?? 0) + 1;
  await tx.runEvent.createMany({
    data: events.map((e, i) => ({ tenantId, runId, seq: first + i, type: e.type, data: { run_id: runId, ...e.data } as Prisma.InputJsonValue })),
  });
  return events.map((_, i) => first + i);
}

/**
 * An INSERT of events after the run's last one, returning their `seq`, on its own or as
 * the body of a data-modifying WITH clause (`events AS (...)`): the statement numbers them itself,
 * so storing events costs no read of the last number first. The caller holds the run's
 * lock, taken by an earlier statement of the transaction (a statement sees what was
 * committed when it began, so only a lock taken before it makes the last number current).
 * `after` names a WITH query of the same statement: no row there, no event stored.
 */
export function insertEventsSql(tenantId: string, runId: string, events: NewEvent[], after?: string): Prisma.Sql {
  const rows = JSON.stringify(events.map((e) => ({ type: e.type, data: { run_id: runId, ...e.data } })));
  return Prisma.sql`INSERT INTO run_events (tenant_id, run_id, seq, type, data)
    SELECT ${tenantId}::text, ${runId}::text, last.seq + e.n, e.value->>'type', e.value->'data'
      FROM (SELECT coalesce(max(seq), 0) AS seq FROM run_events WHERE run_id = ${runId} AND tenant_id = ${tenantId}) last
     CROSS JOIN jsonb_array_elements(${rows}::jsonb) WITH ORDINALITY AS e(value, n)
     ${after ? Prisma.raw(`CROSS JOIN ${after}`) : Prisma.empty}
    RETURNING seq`;
}
