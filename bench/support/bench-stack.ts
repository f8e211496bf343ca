import { freePort, startNats, stopProcess, TEST_ROLES, TestNats, urlWithRole } from '@app/testing';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { removeExecutorResources } from '../../test/support/test-stack';

const ROOT = join(__dirname, '..', '..');
const ADMIN_DATABASE_URL = process.env.RUNBOX_BENCH_ADMIN_DATABASE_URL ?? 'postgresql://runbox:runbox@127.0.0.1:5432/postgres';

export interface BenchStackOptions {
  /** Count each service's Postgres statements and serve NATS's message counts (bench/support/run-costs.ts). */
  countCosts?: boolean;
  /**
   * Run the services as production does, from the build in dist/ (`./runbox bench` builds it
   * first), rather than from their TypeScript through ts-node, whose source maps and loader
   * add CPU of their own to every error and event; for figures of CPU per call.
   */
  built?: boolean;
}

type Service = 'executor' | 'gateway';

export interface BenchTenant {
  tenantId: string;
  apiKey: string;
}

/**
 * Runbox as it runs in production, for benchmarks: the gateway and the executor as two
 * processes of their own (not inside the benchmark's process, whose event loop would then
 * be shared with both), a fresh migrated database and a private NATS server. `stop()`
 * removes all of it, the executor's containers and volumes included.
 */
export class BenchStack {
  readonly adminToken = `admin-${randomBytes(12).toString('hex')}`;
  readonly executorId = `bench-${randomBytes(5).toString('hex')}`;
  /** A role that may create databases and read every backend's statistics. */
  readonly adminDatabaseUrl = ADMIN_DATABASE_URL;
  url = '';
  private nats?: TestNats;
  private database?: string;
  /** The bench's own database, as the deployment-wide role (for reads no API offers). */
  systemDatabaseUrl = '';
  private readonly processes: ChildProcess[] = [];
  /** Where each service writes its statement counts, when counting. */
  private countsDir?: string;

  constructor(
    private readonly env: Record<string, string>,
    private readonly options: BenchStackOptions = {},
  ) {}

  async start(): Promise<this> {
    this.nats = await startNats({ monitor: this.options.countCosts });
    if (this.options.countCosts) this.countsDir = mkdtempSync(join(tmpdir(), 'runbox-bench-counts-'));
    const databaseUrl = await this.createDatabase();
    this.systemDatabaseUrl = urlWithRole(databaseUrl, TEST_ROLES.system);
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    const env = {
      ...process.env,
      // The production roles: tenant work as runbox_app, deployment-wide work as runbox_system.
      DATABASE_URL: urlWithRole(databaseUrl, TEST_ROLES.app),
      SYSTEM_DATABASE_URL: urlWithRole(databaseUrl, TEST_ROLES.system),
      NATS_URL: this.nats.url,
      PORT: String(port),
      RUNBOX_ADMIN_TOKEN: this.adminToken,
      RUNBOX_EXECUTOR_ID: this.executorId,
      RUNBOX_EXECUTOR_HTTP_PORT: '0',
      RUNBOX_LOG_LEVEL: 'error',
      ...this.env,
    };
    this.spawn('executor', env);
    this.spawn('gateway', env);
    await this.waitUntilReady();
    return this;
  }

  async request(method: string, path: string, options: { key?: string; body?: unknown } = {}) {
    const headers: Record<string, string> = {};
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.url}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
    const text = await res.text();
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text };
  }

  async createTenant(name: string, limits?: Record<string, number>): Promise<BenchTenant> {
    const admin = { key: this.adminToken };
    const tenant = await this.request('POST', '/v1/admin/tenants', { ...admin, body: { name, ...(limits ? { limits } : {}) } });
    if (tenant.status !== 201) throw new Error(`creating a tenant failed: ${tenant.status} ${tenant.text}`);
    const key = await this.request('POST', `/v1/admin/tenants/${tenant.body.id}/api_keys`, { ...admin, body: {} });
    if (key.status !== 201) throw new Error(`issuing a key failed: ${key.status} ${key.text}`);
    return { tenantId: tenant.body.id, apiKey: key.body.key };
  }

  /** The executor's process id (for its memory figures). */
  get executorPid(): number {
    const pid = this.processes[0]?.pid;
    if (pid === undefined) throw new Error('the executor is not running');
    return pid;
  }

  /** The gateway's process id (for its memory figures). */
  get gatewayPid(): number {
    const pid = this.processes[1]?.pid;
    if (pid === undefined) throw new Error('the gateway is not running');
    return pid;
  }

  /** The bench's database (for Postgres's own counts of it). */
  get databaseName(): string {
    if (!this.database) throw new Error('the bench stack has no database yet');
    return this.database;
  }

  get natsPid(): number | undefined {
    return this.nats?.pid;
  }

  get natsMonitorUrl(): string {
    if (!this.nats?.monitorUrl) throw new Error('the bench stack was not started with countCosts');
    return this.nats.monitorUrl;
  }

  /** The statements and transactions a service has sent to Postgres so far (needs countCosts). */
  async statementCounts(service: Service): Promise<{ statements: number; transactions: number; peakInTransaction: number }> {
    const pid = service === 'executor' ? this.executorPid : this.gatewayPid;
    const file = this.countsFile(service);
    const previous = readCounts(file)?.seq ?? 0;
    process.kill(pid, 'SIGWINCH');
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
      const counts = readCounts(file);
      if (counts && counts.seq > previous) return counts;
    }
    throw new Error(`the ${service} did not write its statement counts`);
  }

  /** Safe after a partial start. */
  async stop(): Promise<void> {
    await Promise.all(this.processes.map((p) => stopProcess(p)));
    await removeExecutorResources(this.executorId);
    await this.nats?.stop();
    if (this.countsDir) rmSync(this.countsDir, { recursive: true, force: true });
    if (this.database) await admin(`DROP DATABASE IF EXISTS ${this.database} WITH (FORCE)`);
  }

  private countsFile(service: Service): string {
    if (!this.countsDir) throw new Error('the bench stack was not started with countCosts');
    return join(this.countsDir, `${service}.json`);
  }

  private spawn(service: Service, env: NodeJS.ProcessEnv): void {
    const preload = ['-r', 'ts-node/register/transpile-only', '-r', 'tsconfig-paths/register'];
    if (this.countsDir) preload.push('-r', join(ROOT, 'bench/support/pg-statement-counter.ts'));
    // Built services need ts-node only for the statement counter, itself TypeScript.
    const args = this.options.built ? [...(this.countsDir ? preload : []), builtEntry(service)] : [...preload, join(ROOT, `apps/${service}/src/main.ts`)];
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: this.countsDir ? { ...env, RUNBOX_BENCH_STATEMENTS_FILE: this.countsFile(service) } : env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    this.processes.push(child);
  }

  private async createDatabase(): Promise<string> {
    const name = `runbox_bench_${randomBytes(6).toString('hex')}`;
    await admin(`CREATE DATABASE ${name}`);
    this.database = name;
    const url = new URL(ADMIN_DATABASE_URL);
    url.pathname = `/${name}`;
    execFileSync(process.execPath, [join(ROOT, 'scripts/prisma.js'), 'migrate', 'deploy'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url.toString(), MIGRATION_DATABASE_URL: url.toString() },
      stdio: 'pipe',
    });
    return url.toString();
  }

  private async waitUntilReady(timeoutMs = 240_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const exited = this.processes.find((p) => p.exitCode !== null);
      if (exited) throw new Error(`a service exited with ${exited.exitCode} while starting`);
      const ready = await this.request('GET', '/readyz').catch(() => undefined);
      if (ready?.status === 200) return;
      if (Date.now() > deadline) throw new Error(`the gateway was not ready after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** The service's entry point in dist/, as `./runbox up` runs it; it must be there. */
function builtEntry(service: Service): string {
  const entry = join(ROOT, `dist/apps/${service}/apps/${service}/src/main.js`);
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run the bench with ./runbox bench, which builds the services first`);
  return entry;
}

/** The counts a service wrote last; undefined before the first, or while one is being written. */
function readCounts(file: string): { seq: number; statements: number; transactions: number; peakInTransaction: number } | undefined {
  try {
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { seq: number; statements: number; transactions: number; peakInTransaction: number }) : undefined;
  } catch {
    return undefined;
  }
}

async function admin(sql: string): Promise<void> {
  const client = new Client({ connectionString: ADMIN_DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
