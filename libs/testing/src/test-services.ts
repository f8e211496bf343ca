import { TestDatabase } from './test-database';
import { TestNats } from './test-nats';

/**
 * The settings every service a test starts shares: the production database roles (tenant
 * work as runbox_app, deployment-wide work as runbox_system), the test's NATS server, quiet
 * logs, no warm pool, and the exact sandbox image `./runbox test` built for this tree (not whatever
 * `:latest` points at).
 */
export function testServiceEnv(db: TestDatabase, nats: TestNats, executorId: string): Record<string, string> {
  return {
    DATABASE_URL: db.appUrl,
    SYSTEM_DATABASE_URL: db.url,
    NATS_URL: nats.url,
    RUNBOX_EXECUTOR_ID: executorId,
    // Several executors run on one machine in tests: each takes any free port for its probes.
    RUNBOX_EXECUTOR_HTTP_PORT: '0',
    RUNBOX_LOG_LEVEL: process.env.RUNBOX_TEST_LOG_LEVEL ?? 'silent',
    // No warm pool unless a test asks for one: a session's container is then always its own
    // (labelled with its session), and test stacks do not start containers nobody uses.
    RUNBOX_WARM_POOL_MAX: '0',
    ...(process.env.RUNBOX_SANDBOX_IMAGE ? { RUNBOX_SANDBOX_IMAGE: process.env.RUNBOX_SANDBOX_IMAGE } : {}),
  };
}

/** Runs `start`; if it fails, `stop` undoes whatever part did start, and the error is rethrown. */
export async function startOrUndo<T>(start: () => Promise<T>, stop: () => Promise<unknown>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
