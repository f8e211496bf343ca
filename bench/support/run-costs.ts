/**
 * What a phase of a bench cost, in figures the machine's load does not change: Postgres
 * statements and transactions (counted in each service, and the bench database's commits
 * as Postgres counts them), NATS messages (the server's own counts), and CPU time of each
 * process (gateway, executor, nats-server, the Postgres backends of the bench database).
 * Divided by the runs of the phase, they say where a run's time goes on an idle machine.
 */
import { Client } from 'pg';
import { BenchStack } from './bench-stack';
import { processSeconds } from './cpu-per-call';

/** Postgres flushes an idle backend's statistics within 10 s (PGSTAT_IDLE_INTERVAL). */
const STATS_FLUSH_MS = 11_000;

interface CostSnapshot {
  /** `peakInTransaction`: the most of the service's connections in a transaction at once since the last snapshot. */
  statements: Record<'gateway' | 'executor', { statements: number; transactions: number; peakInTransaction: number }>;
  /** xact_commit + xact_rollback of the bench database. */
  databaseTransactions: number;
  natsMessages: { in: number; out: number };
  cpuMs: Record<'gateway' | 'executor' | 'nats' | 'postgres', number>;
}

export class RunCostMeter {
  constructor(private readonly stack: BenchStack) {}

  /** Waits for Postgres to publish its counts, then takes them (call before and after a phase). */
  async snapshot(): Promise<CostSnapshot> {
    await new Promise((r) => setTimeout(r, STATS_FLUSH_MS));
    const admin = new Client({ connectionString: this.stack.adminDatabaseUrl });
    await admin.connect();
    try {
      const db = this.stack.databaseName;
      const xact = await admin.query<{ n: string }>('SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1', [db]);
      const backends = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db]);
      const varz = (await (await fetch(`${this.stack.natsMonitorUrl}/varz`)).json()) as { in_msgs: number; out_msgs: number };
      const [gateway, executor] = await Promise.all([this.stack.statementCounts('gateway'), this.stack.statementCounts('executor')]);
      return {
        statements: { gateway, executor },
        databaseTransactions: Number(xact.rows[0]?.n ?? 0),
        natsMessages: { in: varz.in_msgs, out: varz.out_msgs },
        cpuMs: {
          gateway: cpuMs(this.stack.gatewayPid),
          executor: cpuMs(this.stack.executorPid),
          nats: cpuMs(this.stack.natsPid),
          postgres: backends.rows.reduce((sum, b) => sum + cpuMs(b.pid), 0),
        },
      };
    } finally {
      await admin.end();
    }
  }

  /** Lines of per-run figures between two snapshots (Postgres backends that ended in between are not counted). */
  static report(before: CostSnapshot, after: CostSnapshot, runs: number): string[] {
    const per = (a: number, b: number) => ((b - a) / runs).toFixed(1);
    const s = (who: 'gateway' | 'executor') =>
      `${per(before.statements[who].statements, after.statements[who].statements)} statements in ${per(before.statements[who].transactions, after.statements[who].transactions)} transactions`;
    const cpu = (who: keyof CostSnapshot['cpuMs']) => `${who} ${per(before.cpuMs[who], after.cpuMs[who])}`;
    return [
      `  per run: Postgres  gateway ${s('gateway')}; executor ${s('executor')}`,
      `                     gateway connections in a transaction at once: at most ${after.statements.gateway.peakInTransaction}`,
      `                     bench database commits ${per(before.databaseTransactions, after.databaseTransactions)} (Postgres's count)`,
      `           NATS      ${per(before.natsMessages.in, after.natsMessages.in)} messages in, ${per(before.natsMessages.out, after.natsMessages.out)} out (the server's count)`,
      `           CPU ms    ${cpu('gateway')}, ${cpu('executor')}, ${cpu('nats')}, ${cpu('postgres')} (backends of the bench database)`,
    ];
  }
}

/** User + system CPU time of a process (all its threads), in ms; 0 if it is gone. */
function cpuMs(pid: number | undefined): number {
  return pid === undefined ? 0 : (processSeconds(pid) ?? 0) * 1000;
}
