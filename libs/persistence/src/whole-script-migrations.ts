import { PrismaPg } from '@prisma/adapter-pg';

type PgAdapter = Awaited<ReturnType<PrismaPg['connect']>>;

/**
 * The pg driver adapter for Prisma's migrate commands (prisma.config.ts), sending each
 * migration script to PostgreSQL whole. The stock adapter splits a script at every `;` and
 * runs the pieces one by one, which breaks function bodies (`$$ … ; … $$`), `DO` blocks, and
 * any string or comment holding a semicolon. One simple-protocol query takes many statements
 * and PostgreSQL parses them itself, dollar quotes and all; it also makes the script one
 * implicit transaction, so a failing migration leaves nothing half applied (as Prisma's
 * native engine does). The cost: statements that refuse a transaction block (`CREATE INDEX
 * CONCURRENTLY`, `VACUUM`) need a migration of their own, alone in its file.
 */
export class WholeScriptPrismaPg extends PrismaPg {
  override async connect(): Promise<PgAdapter> {
    return runsScriptsWhole(await super.connect());
  }

  override async connectToShadowDb(): Promise<PgAdapter> {
    return runsScriptsWhole(await super.connectToShadowDb());
  }
}

function runsScriptsWhole(adapter: PgAdapter): PgAdapter {
  const pool = adapter.underlyingDriver();
  // The adapter's own error mapping turns a pg error into the DriverAdapterError that Prisma
  // reports with its SQLSTATE and message; it is protected, not private, in adapter-pg 7.
  const reportAsDriverError = (error: unknown): never => (adapter as unknown as { onError(error: unknown): never }).onError(error);
  adapter.executeScript = async (script: string): Promise<void> => {
    // No parameters: node-postgres uses the simple query protocol, which allows many statements.
    await pool.query(script).catch(reportAsDriverError);
  };
  return adapter;
}
