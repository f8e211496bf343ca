import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

/**
 * Each test file gets its own database, cloned from a migrated template that `./runbox
 * test` prepares (RUNBOX_TEST_TEMPLATE_DB). Cloning takes ~100 ms and keeps test files from
 * seeing each other's rows, so they can run in parallel and in any order.
 */
export interface TestDatabase {
  name: string;
  /** As runbox_system: sees every tenant's rows (for assertions the API cannot make). */
  url: string;
  /** As runbox_app, the services' tenant role: row-level security holds. */
  appUrl: string;
  /** As the owner (runbox), who made the tables; FORCE makes the policies hold for it too. */
  ownerUrl: string;
  drop(): Promise<void>;
}

/** The roles scripts/infra.sh creates, with their development passwords. */
export const TEST_ROLES = {
  app: { user: 'runbox_app', password: 'runbox_app' },
  system: { user: 'runbox_system', password: 'runbox_system' },
};

/** The server's maintenance database, as the role that creates and drops test databases. */
export const ADMIN_URL = process.env.RUNBOX_TEST_ADMIN_DATABASE_URL ?? 'postgresql://runbox:runbox@127.0.0.1:5432/postgres';
const TEMPLATE = process.env.RUNBOX_TEST_TEMPLATE_DB ?? 'runbox_test_template';

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `runbox_test_${randomBytes(6).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`));
  const urlAs = (role?: { user: string; password: string }) => {
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    return role ? urlWithRole(url.toString(), role) : url.toString();
  };
  return {
    url: urlAs(TEST_ROLES.system),
    appUrl: urlAs(TEST_ROLES.app),
    ownerUrl: urlAs(),
    name,
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** Runs `work` on a connection to the maintenance database (creating and dropping databases). */
export async function withAdmin<T>(work: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Runs SQL against a test database (pass `db.url` to see every tenant's rows). */
export async function queryDatabase<T extends Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** The same database URL, logged in as another role (e.g. one of TEST_ROLES). */
export function urlWithRole(databaseUrl: string, role: { user: string; password: string }): string {
  const url = new URL(databaseUrl);
  url.username = role.user;
  url.password = role.password;
  return url.toString();
}
