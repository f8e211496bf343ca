import { execFile, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { freePort, TEST_ROLES } from '@app/testing';

const run = promisify(execFile);

/** The machine's PostgreSQL binaries (Debian puts them under /usr/lib/postgresql/<version>/bin). */
function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const version = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  if (!version) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql (scripts/infra.sh installs them)');
  return join(root, version, 'bin');
}

/**
 * A PostgreSQL server of the test's own, from the machine's binaries, with its own data
 * directory, port and socket directory: a test may stop and restart it without touching the
 * server every other test uses. It holds one database, `runbox`, copied from the migrated
 * template that `./runbox test` prepares, with the three Runbox roles. Tests run as root and
 * PostgreSQL refuses to, so its processes run as the `postgres` user.
 */
export class PrivatePostgres {
  readonly dir = mkdtempSync(join(tmpdir(), 'runbox-pg-'));
  port = 0;
  private readonly bin = postgresBin();
  private readonly owner = { uid: 0, gid: 0 };

  /** As runbox_app (row-level security holds): the services' DATABASE_URL. */
  get appUrl(): string {
    return this.url(TEST_ROLES.app);
  }

  /** As runbox_system: SYSTEM_DATABASE_URL, and the tests' view of every tenant's rows. */
  get systemUrl(): string {
    return this.url(TEST_ROLES.system);
  }

  async start(): Promise<this> {
    const { stdout } = await run('id', ['-u', 'postgres']);
    this.owner.uid = Number(stdout.trim());
    this.owner.gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(this.dir, this.owner.uid, this.owner.gid);
    this.port = await freePort();
    await this.asPostgres('initdb', ['-D', join(this.dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await this.up();
    await this.loadTemplate();
    return this;
  }

  /** Starts the server (again) on its port and waits until it takes connections. */
  async up(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
    await this.asPostgres('pg_ctl', ['-D', join(this.dir, 'data'), '-l', join(this.dir, 'server.log'), '-o', options, '-w', '-t', '60', 'start']);
  }

  /** Stops it as an operator's restart does: fast shutdown, every connection ended. */
  async down(): Promise<void> {
    await this.asPostgres('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'fast', '-w', '-t', '60', 'stop']);
  }

  /** Stops the server and removes its data directory. */
  async stop(): Promise<void> {
    if (existsSync(join(this.dir, 'data', 'postmaster.pid'))) await this.down().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** SQL as runbox_system (sees every tenant's rows through its policies). */
  async query<T extends Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = new Client({ connectionString: this.systemUrl });
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end();
    }
  }

  /** The roles as scripts/infra.sh makes them, and the template's schema and rows as database `runbox`. */
  private async loadTemplate(): Promise<void> {
    const template = process.env.RUNBOX_TEST_TEMPLATE_DB ?? 'runbox_test_template';
    const admin = new URL(process.env.RUNBOX_TEST_ADMIN_DATABASE_URL ?? 'postgresql://runbox:runbox@127.0.0.1:5432/postgres');
    admin.pathname = `/${template}`;
    const superuser = new Client({ host: '127.0.0.1', port: this.port, user: 'postgres', database: 'postgres' });
    await superuser.connect();
    try {
      await superuser.query(`CREATE ROLE runbox LOGIN CREATEDB PASSWORD 'runbox'`);
      for (const role of Object.values(TEST_ROLES)) {
        await superuser.query(`CREATE ROLE ${role.user} LOGIN PASSWORD '${role.password}' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT`);
      }
      await superuser.query('CREATE DATABASE runbox OWNER runbox');
    } finally {
      await superuser.end();
    }
    // The template's dump, restored as its owner: tables, policies, grants and the migration log.
    const dump = await run(join(this.bin, 'pg_dump'), ['--no-owner', '--enable-row-security', '--dbname', admin.toString()], { maxBuffer: 64 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      const psql = spawn(join(this.bin, 'psql'), ['-q', '-v', 'ON_ERROR_STOP=1', `postgresql://runbox:runbox@127.0.0.1:${this.port}/runbox`], { stdio: ['pipe', 'ignore', 'pipe'] });
      let errors = '';
      psql.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
      psql.on('error', reject);
      psql.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`restoring the template failed: ${errors}`))));
      psql.stdin.end(dump.stdout);
    });
  }

  private url(role: { user: string; password: string }): string {
    return `postgresql://${role.user}:${role.password}@127.0.0.1:${this.port}/runbox`;
  }

  private async asPostgres(tool: string, args: string[]): Promise<void> {
    await run(join(this.bin, tool), args, { uid: this.owner.uid, gid: this.owner.gid, cwd: this.dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  }
}
