import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

/**
 * Each test file gets its own database, cloned from a migrated template that `./runbox
 * test` prepares (RUNBOX_TEST_TEMPLATE_DB). Cloning takes ~100 ms and keeps test files from
 * seeing each other's rows, so they can run in parallel and in any order.
 */
export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

const ADMIN_URL = process.env.RUNBOX_TEST_ADMIN_DATABASE_URL ?? 'postgresql://runbox:runbox@127.0.0.1:5432/postgres';
const TEMPLATE = process.env.RUNBOX_TEST_TEMPLATE_DB ?? 'runbox_test_template';

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `runbox_test_${randomBytes(6).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function withAdmin<T>(work: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Runs SQL against a test database as its owner (for assertions the API cannot make). */
export async function queryDatabase<T extends Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}
