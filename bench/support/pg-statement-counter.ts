/**
 * Loaded into a bench stack's service (`node -r`) to count the statements it sends to
 * Postgres (every `query` of a pg client, BEGIN and COMMIT included, whichever pool or
 * Prisma adapter sent it; a query of several statements, such as a whole read-only
 * transaction sent at once, counts once) and the transactions they make (an explicit BEGIN, or a
 * statement outside one), and the most connections in a transaction at the same moment.
 * On SIGWINCH (ignored by default, and not one of the signals Nest's shutdown hooks stop
 * on) the process writes `{ seq, statements, transactions, peakInTransaction }` to the file
 * named by RUNBOX_BENCH_STATEMENTS_FILE (the peak since the previous signal), so the bench
 * reads the counts before and after a phase. With RUNBOX_BENCH_STATEMENTS_LOG
 * set it also appends each statement's first line to that file (to see what a run sends).
 * Nothing of this is in the services.
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { Client } from 'pg';

const file = process.env.RUNBOX_BENCH_STATEMENTS_FILE;
const log = process.env.RUNBOX_BENCH_STATEMENTS_LOG;
if (file) {
  let statements = 0;
  let transactions = 0;
  let seq = 0;
  const inTransaction = new Set<Client>();
  let peakInTransaction = 0;
  const query = Client.prototype.query as (...args: unknown[]) => unknown;
  Client.prototype.query = function countedQuery(this: Client, ...args: unknown[]) {
    const first = args[0];
    const text = (typeof first === 'string' ? first : (first as { text?: unknown } | undefined)?.text) ?? '';
    const verb = typeof text === 'string' ? /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() : undefined;
    statements++;
    if (log) appendFileSync(log, `${process.pid} ${String(text).replace(/\s+/g, ' ').slice(0, 160)}\n`);
    if (verb === 'BEGIN' || verb === 'START') {
      transactions++;
      // A whole transaction sent as one query (`BEGIN; ...; COMMIT`) leaves none open.
      if (!/;\s*COMMIT\s*;?\s*$/i.test(text as string)) inTransaction.add(this);
      peakInTransaction = Math.max(peakInTransaction, inTransaction.size + (inTransaction.has(this) ? 0 : 1));
    } else if (verb === 'COMMIT' || verb === 'END' || (verb === 'ROLLBACK' && !/^\s*ROLLBACK\s+TO\b/i.test(text as string))) {
      inTransaction.delete(this);
    } else if (!inTransaction.has(this)) {
      transactions++;
    }
    return query.apply(this, args);
  } as typeof Client.prototype.query;
  process.on('SIGWINCH', () => {
    writeFileSync(file, JSON.stringify({ seq: ++seq, statements, transactions, peakInTransaction }));
    peakInTransaction = inTransaction.size;
  });
}
