import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma, PrismaClient } from '@prisma/client';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Client, ClientConfig, Pool, PoolClient, PoolConfig, QueryResult } from 'pg';

export type Tx = Prisma.TransactionClient;

/**
 * A transaction for raw SQL only (`tenantSql`, `systemSql`). Results come as pg gives
 * them: cast counts and other bigints to `::int` in the statement, so they read the same
 * whether the work runs on its own connection or joins a Prisma transaction.
 */
export interface SqlTx {
  query<T>(sql: Prisma.Sql): Promise<T[]>;
}

export interface DatabaseUrls {
  /** Tenant work, as a role that row-level security holds (runbox_app). */
  url: string;
  /** Deployment-wide work, as runbox_system. Defaults to `url` (tests of one repository). */
  systemUrl?: string;
}

/** A transaction-scoped advisory lock: `pg_advisory_xact_lock(classId, hashtext(name))`. */
export interface AdvisoryLock {
  classId: number;
  name: string;
}

/** Connections each pool keeps at most (see docs/operations.md, "Connection pools"). */
export interface PoolSizes {
  tenant: number;
  system: number;
}

/** What a process that runs no run workers (the executor, the command-line tools) keeps. */
export const DEFAULT_POOL_SIZES: PoolSizes = { tenant: 10, system: 4 };

/** The tenant transaction that work started by `tenant()` is running in. */
interface TenantScope {
  tenantId: string;
  tx: Tx;
  open: boolean;
  /** Nested blocks of one scope run one after another, each in its own savepoint. */
  chain: Promise<unknown>;
}

/**
 * A burst waits for a free connection up to this long; past it the work fails as "database
 * unavailable" (a 503 the client may retry). A connection is held for a transaction's few
 * milliseconds, so a 10 s wait means the database has fallen far behind, not a burst: the
 * runs bench's 32 at once waits well under a second for one on 2 busy cores.
 */
const POOL_WAIT_MS = 10_000;
// Generous: a quota check holds a per-tenant lock, so a burst of one tenant's requests
// queues. Longer than the pool's wait, so that wait is what ends a transaction that cannot start.
const TRANSACTION_OPTIONS = { maxWait: 15_000, timeout: 30_000 };
/**
 * A new connection that takes longer than this fails (pg waits for ever by default), so a
 * database host that stopped answering gives a prompt 503 rather than a hung request.
 */
const CONNECT_TIMEOUT_MS = 5_000;
/**
 * An idle connection is kept this long (pg's default is 10 s). Opening one costs a SCRAM
 * exchange (thousands of PBKDF2 rounds) and several round trips, which a gateway would
 * otherwise pay again after every quiet spell of a few seconds; the pools are small.
 */
const IDLE_TIMEOUT_MS = 5 * 60_000;

/**
 * The database connections. Repositories reach tables only through `tenant()` (one
 * tenant's rows: the transaction sets `app.tenant_id`, which the row-level security policies
 * compare with each row's tenant id) or `system()` (deployment-wide work: authentication,
 * admin, the executor's sweeps), which uses a separate pool as the runbox_system role;
 * `tenantSql`, `tenantRead` and `systemSql` are the same for raw SQL, without Prisma.
 */
export class PrismaService {
  readonly client: PrismaClient;
  private readonly systemClient: PrismaClient;
  /** The pools under both clients, which raw SQL transactions share with Prisma. */
  private readonly tenantPool: Pool;
  private readonly systemPool: Pool;
  private readonly scopes = new AsyncLocalStorage<TenantScope>();

  constructor(urls: DatabaseUrls | string, pools: PoolSizes = DEFAULT_POOL_SIZES) {
    const { url, systemUrl } = typeof urls === 'string' ? { url: urls, systemUrl: undefined } : urls;
    this.tenantPool = newPool(url, pools.tenant);
    this.systemPool = systemUrl ? newPool(systemUrl, pools.system) : this.tenantPool;
    this.client = new PrismaClient({ adapter: new PrismaPg(this.tenantPool) });
    this.systemClient = systemUrl ? new PrismaClient({ adapter: new PrismaPg(this.systemPool) }) : this.client;
  }

  /** The services' connection: refuses to start on a tenant role that could bypass isolation. */
  static async forService(urls: DatabaseUrls, pools?: PoolSizes): Promise<PrismaService> {
    const db = new PrismaService(urls, pools);
    try {
      await db.assertTenantRoleIsIsolated();
    } catch (err) {
      await db.close();
      throw err;
    }
    return db;
  }

  /**
   * Runs `work` in one transaction whose `app.tenant_id` is `tenantId`. Called inside
   * another tenant() of the same tenant, it joins that transaction in a savepoint, so a
   * service can make several repository calls one atomic unit (the quota check does).
   */
  tenant<T>(tenantId: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    const outer = this.scopes.getStore();
    if (outer?.open) return this.nested(outer, tenantId, work);
    return this.client.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT set_config('app.tenant_id', ${tenantId}, true)`;
      const scope: TenantScope = { tenantId, tx, open: true, chain: Promise.resolve() };
      try {
        return await this.scopes.run(scope, () => work(tx));
      } finally {
        // Work that outlives the transaction (a fire-and-forget promise) starts its own.
        scope.open = false;
      }
    }, TRANSACTION_OPTIONS);
  }

  /**
   * tenant() for work that is raw SQL only: the same transaction with the same
   * `app.tenant_id`, on a connection of the same pool, sent straight through pg. Prisma
   * spends about as much CPU on each statement of an interactive transaction as the
   * statement's round trip costs (its transaction manager, the query interpreter, its
   * tracing), which on a run's path is most of the gateway's work; here the BEGIN and the
   * setting go in one round trip. Inside an open tenant() of the same tenant it joins that
   * transaction in a savepoint, as tenant() does. `work` must not start other tenant work
   * of its own: that would be a transaction (and a connection) of its own.
   */
  async tenantSql<T>(tenantId: string, work: (sql: SqlTx) => Promise<T>, options: { advisoryLock?: AdvisoryLock } = {}): Promise<T> {
    const { advisoryLock: lock } = options;
    const outer = this.scopes.getStore();
    if (outer?.open) {
      return this.nested(outer, tenantId, async (tx) => {
        if (lock) await tx.$executeRaw`SELECT pg_advisory_xact_lock(${lock.classId}::int, hashtext(${lock.name}))`;
        return work(prismaSqlTx(tx));
      });
    }
    const client = await this.tenantPool.connect();
    let begin = beginTenant(client, tenantId, 'BEGIN');
    // A statement of its own, so the work's first statement begins after the lock is granted.
    if (lock) begin += `; SELECT pg_advisory_xact_lock(${Math.trunc(lock.classId)}, hashtext(${client.escapeLiteral(lock.name)}))`;
    return rollingBackOnFailure(client, async () => {
      await client.query(begin);
      const result = await work({ query: async <R>(sql: Prisma.Sql) => (await client.query(sql.text, sql.values)).rows as R[] });
      await client.query('COMMIT');
      return result;
    });
  }

  /**
   * One read-only statement of tenant work in one round trip: BEGIN, the tenant setting,
   * the statement and COMMIT go to Postgres as one simple query, the statement's values
   * written into it as escaped literals (strings, finite numbers, booleans and null only).
   * A transaction of three round trips becomes one, for the reads every live event stream
   * and every run's tool listing make. Inside an open tenant() it joins that transaction.
   */
  async tenantRead<T>(tenantId: string, sql: Prisma.Sql): Promise<T[]> {
    const outer = this.scopes.getStore();
    if (outer?.open) return this.nested(outer, tenantId, (tx) => tx.$queryRaw<T[]>(sql));
    const client = await this.tenantPool.connect();
    return rollingBackOnFailure(client, async () => {
      const text = `${beginTenant(client, tenantId, 'BEGIN READ ONLY')};\n${withLiterals(client, sql)};\nCOMMIT`;
      const results = (await client.query(text)) as unknown as QueryResult[];
      return results[2].rows as T[];
    });
  }

  /**
   * One statement of deployment-wide work, outside any transaction (a read of one statement
   * needs none): one round trip instead of three.
   */
  async systemSql<T>(sql: Prisma.Sql): Promise<T[]> {
    return this.scopes.exit(async () => (await this.systemPool.query(sql.text, sql.values)).rows as T[]);
  }

  /** Deployment-wide work that is not on behalf of one tenant. */
  system<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    // Outside any tenant scope: system work never runs in a tenant's transaction.
    return this.scopes.exit(() => this.systemClient.$transaction((tx) => work(tx), TRANSACTION_OPTIONS));
  }

  /**
   * Refuses a tenant connection that could see past row-level security: a superuser, a
   * role with BYPASSRLS, or one that owns (or is a member of the owner of) a table.
   */
  async assertTenantRoleIsIsolated(): Promise<void> {
    const [role] = await this.client.$queryRaw<Array<{ name: string; superuser: boolean; bypass: boolean; owned: string[] }>>`
      SELECT r.rolname AS name, r.rolsuper AS superuser, r.rolbypassrls AS bypass,
             coalesce((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
                        JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
                         AND pg_has_role(current_user, c.relowner, 'MEMBER')), '{}') AS owned
        FROM pg_roles r WHERE r.rolname = current_user`;
    const problem = role.superuser
      ? 'is a superuser'
      : role.bypass
        ? 'has BYPASSRLS'
        : role.owned.length > 0
          ? `owns table ${role.owned[0]}`
          : undefined;
    if (problem) {
      throw new Error(
        `DATABASE_URL connects as ${role.name}, which ${problem}: row-level security would not hold. ` +
          'Connect as a role that owns nothing and cannot bypass it (runbox_app; see docs/tenancy.md).',
      );
    }
  }

  async ping(): Promise<boolean> {
    try {
      await this.client.$queryRaw`SELECT 1`;
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.client.$disconnect();
    if (this.systemClient !== this.client) await this.systemClient.$disconnect();
    await this.tenantPool.end();
    if (this.systemPool !== this.tenantPool) await this.systemPool.end();
  }

  private nested<T>(scope: TenantScope, tenantId: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    if (scope.tenantId !== tenantId) {
      return Promise.reject(new Error(`tenant work for ${tenantId} was started inside tenant ${scope.tenantId}'s transaction`));
    }
    const { tx } = scope;
    const step = scope.chain.then(async () => {
      // A failed statement aborts a Postgres transaction; the savepoint confines that (and
      // the block's writes) to this block, as its own transaction would have.
      await tx.$executeRawUnsafe('SAVEPOINT runbox_nested');
      const inner: TenantScope = { tenantId, tx, open: true, chain: Promise.resolve() };
      try {
        const result = await this.scopes.run(inner, () => work(tx));
        await tx.$executeRawUnsafe('RELEASE SAVEPOINT runbox_nested');
        return result;
      } catch (err) {
        await tx
          .$executeRawUnsafe('ROLLBACK TO SAVEPOINT runbox_nested')
          .then(() => tx.$executeRawUnsafe('RELEASE SAVEPOINT runbox_nested'))
          .catch(() => undefined); // the transaction itself is gone; the caller sees `err`
        throw err;
      } finally {
        inner.open = false;
      }
    });
    scope.chain = step.catch(() => undefined);
    return step;
  }
}

/**
 * The statement that opens a tenant transaction on `client` (`begin`: BEGIN or BEGIN READ
 * ONLY) and sets its tenant and, as Prisma bounds an interactive transaction by
 * TRANSACTION_OPTIONS.timeout, a statement timeout of as much.
 */
function beginTenant(client: PoolClient, tenantId: string, begin: 'BEGIN' | 'BEGIN READ ONLY'): string {
  return `${begin}; SELECT set_config('app.tenant_id', ${client.escapeLiteral(tenantId)}, true), set_config('statement_timeout', '${TRANSACTION_OPTIONS.timeout}', true)`;
}

/**
 * Runs `work`, a transaction on `client`; when it fails, rolls the transaction back (a
 * failed statement leaves it open and aborted). Releases the client either way.
 */
async function rollingBackOnFailure<T>(client: PoolClient, work: () => Promise<T>): Promise<T> {
  // A connection whose ROLLBACK failed is broken: the pool drops it rather than lend it again.
  let broken: Error | undefined;
  try {
    return await work();
  } catch (err) {
    await client.query('ROLLBACK').catch((e: unknown) => {
      broken = e instanceof Error ? e : new Error(String(e));
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The statement with its values written in as literals (see PrismaService.tenantRead). */
function withLiterals(client: PoolClient, sql: Prisma.Sql): string {
  let text = sql.strings[0];
  sql.values.forEach((value, i) => {
    text += literal(client, value) + sql.strings[i + 1];
  });
  return text;
}

function literal(client: PoolClient, value: unknown): string {
  if (value === null) return 'NULL';
  // A NUL would end the query text early (Postgres cannot store one in text anyway).
  if (typeof value === 'string' && !value.includes('\0')) return client.escapeLiteral(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' && Number.isFinite(value)) return `(${value})`;
  throw new Error(`tenantRead takes strings without NUL, finite numbers, booleans and null as values, not this ${typeof value}`);
}

/** A Prisma transaction as a SqlTx, for raw SQL helpers that serve both kinds of transaction. */
export function prismaSqlTx(tx: Tx): SqlTx {
  return { query: <R>(sql: Prisma.Sql) => tx.$queryRaw<R[]>(sql) };
}

/**
 * pg applies one `connectionTimeoutMillis` to two waits: for a free connection of a full
 * pool, and for a new connection to open. The pool gets the longer wait; each connection
 * it opens keeps the short one, so a burst queues while a silent database host still fails fast.
 */
class PromptClient extends Client {
  constructor(config?: string | ClientConfig) {
    super({ ...(typeof config === 'string' ? { connectionString: config } : config), connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
}

function newPool(connectionString: string, max: number): Pool {
  const config: PoolConfig = { connectionString, max, connectionTimeoutMillis: POOL_WAIT_MS, idleTimeoutMillis: IDLE_TIMEOUT_MS, Client: PromptClient as unknown as PoolConfig['Client'] };
  const pool = new Pool(config);
  // An idle connection the server closed (a restart) is dropped by the pool and opened
  // again when next needed; unheard, its 'error' would end the process.
  pool.on('error', () => undefined);
  return pool;
}
