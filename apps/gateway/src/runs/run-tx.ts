import { RunEventType } from '@app/contracts';
import { Tx } from '@app/persistence';
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

/**
 * Locks the run's row for the rest of the transaction. Every change to a run's state, its
 * tool calls, its messages and its events takes this lock first, so writers on different
 * replicas (the worker, a cancel, an approval) never interleave: event numbers stay
 * gap-free and nothing is written after the run's terminal event.
 */
export async function lockRun(tx: Tx, tenantId: string, runId: string): Promise<LockedRun | null> {
  const rows = await tx.$queryRaw<
    Array<{ status: string; session_id: string; parent_run_id: string | null; lease_owner: string | null; lease_expires_at: Date | null; started_at: Date | null; now: Date }>
  >`SELECT status, session_id, parent_run_id, lease_owner, lease_expires_at, started_at, now() AS now
      FROM runs WHERE id = ${runId} AND tenant_id = ${tenantId} FOR UPDATE`;
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
