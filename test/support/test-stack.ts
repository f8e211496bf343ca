import { INestApplication, INestApplicationContext } from '@nestjs/common';
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, RunboxConfig } from '@app/config';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { startExecutor } from '../../apps/executor/src/executor.app';
import { createGateway } from '../../apps/gateway/src/bootstrap';
import { createTestDatabase, removeExecutorResources, startOrUndo, TestDatabase, testServiceEnv } from '@app/testing';
import { freePort, startNats, stopProcess, TestNats } from '@app/testing';

/** The built gateway (`npx nest build gateway`; `./runbox test` builds it). */
export const GATEWAY_MAIN = join(__dirname, '..', '..', 'dist', 'apps', 'gateway', 'apps', 'gateway', 'src', 'main.js');

export { removeExecutorResources };

export interface StackOptions {
  /** Extra environment, as an operator would set it. */
  env?: Record<string, string>;
  /** Start an executor too (default true). */
  executor?: boolean;
  /**
   * Run the gateway as a separate OS process from the build in dist/ (as production runs
   * it), so a test can SIGKILL it mid-run and start it again.
   */
  gatewayProcess?: boolean;
}

export interface TenantCredentials {
  tenantId: string;
  apiKey: string;
}

/**
 * The whole product for one test file: a private database and NATS server, the gateway
 * (built by the same bootstrap as production, listening on a loopback port) and an executor
 * driving the real Docker engine. `stop()` removes every container and volume the executor
 * made, by its label.
 */
export class TestStack {
  readonly adminToken = `admin-${randomBytes(12).toString('hex')}`;
  readonly executorId = `test-${randomBytes(5).toString('hex')}`;
  url = '';
  config!: RunboxConfig;
  db!: TestDatabase;
  nats!: TestNats;
  private gateway?: INestApplication;
  private executor?: INestApplicationContext;
  private env: Record<string, string> = {};
  private gatewayChild?: ChildProcess;
  private gatewayLog = '';
  private stopped = false;

  constructor(private readonly options: StackOptions = {}) {}

  /** Starts everything; if any part fails, stops what did start before rethrowing. */
  start(): Promise<this> {
    return startOrUndo(() => this.startParts(), () => this.stop());
  }

  private async startParts(): Promise<this> {
    this.nats = await startNats();
    this.db = await createTestDatabase();
    this.env = {
      ...testServiceEnv(this.db, this.nats, this.executorId),
      RUNBOX_ADMIN_TOKEN: this.adminToken,
      PORT: '0',
      ...this.options.env,
    };
    this.config = loadConfig(this.env);
    if (this.options.executor !== false) await this.startExecutor();
    if (this.options.gatewayProcess) {
      this.env.PORT = String(await freePort());
      this.url = `http://127.0.0.1:${this.env.PORT}`;
      await this.startGatewayProcess();
      return this;
    }
    const app = await createGateway(this.config);
    await app.listen(0, '127.0.0.1');
    this.gateway = app;
    this.url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    return this;
  }

  /** The environment the stack's services run with, for more services of the same deployment. */
  get serviceEnv(): Record<string, string> {
    return { ...this.env };
  }

  /** The in-process gateway app, for tests that read its routes (not with gatewayProcess). */
  get gatewayApp(): INestApplication {
    if (!this.gateway) throw new Error('the gateway does not run in this process');
    return this.gateway;
  }

  /** Starts the built gateway as a child process on the stack's port and waits until it answers. */
  async startGatewayProcess(): Promise<void> {
    if (!existsSync(GATEWAY_MAIN)) throw new Error(`${GATEWAY_MAIN} is missing: run 'npx nest build gateway' (./runbox test does)`);
    this.gatewayLog = '';
    // Its log stays in memory (gatewayOutput), so failures can show it.
    const env = { ...process.env, ...this.env, RUNBOX_LOG_LEVEL: process.env.RUNBOX_TEST_LOG_LEVEL ?? 'info' };
    const child = spawn(process.execPath, [GATEWAY_MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => (this.gatewayLog = (this.gatewayLog + chunk.toString()).slice(-20_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.gatewayChild = child;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}: ${this.gatewayLog}`);
      const ok = await fetch(`${this.url}/healthz`).then((r) => r.ok).catch(() => false);
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`the gateway did not answer within 60 s: ${this.gatewayLog}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Stops the gateway process: SIGKILL (the default) is a crash, with no shutdown hooks;
   * SIGTERM is an orderly stop, as a deployment does.
   */
  async killGateway(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.gatewayChild;
    if (!child) throw new Error('the gateway is not a child process (start the stack with gatewayProcess: true)');
    await stopProcess(child, signal);
    this.gatewayChild = undefined;
  }

  /** The gateway process's recent output, for a failing test's message. */
  get gatewayOutput(): string {
    return this.gatewayLog;
  }

  async startExecutor(): Promise<void> {
    this.executor = await startExecutor(this.config, false);
  }

  /** A provider of the running executor (its SandboxPool, SandboxService), for tests that look inside. */
  executorProvider<T>(token: new (...args: never[]) => T): T {
    if (!this.executor) throw new Error('no executor is running');
    return this.executor.get(token);
  }

  async stopExecutor(): Promise<void> {
    await this.executor?.close();
    this.executor = undefined;
  }

  /** POST/GET/DELETE against the gateway, returning status, headers and parsed body. */
  async request(method: string, path: string, options: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string>; baseUrl?: string } = {}) {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
    const res = await fetch(`${options.baseUrl ?? this.url}${path}`, { method, headers, body });
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, body: json, text };
  }

  async createTenant(name = `tenant-${randomBytes(4).toString('hex')}`, limits?: Record<string, number>): Promise<TenantCredentials> {
    const admin = { key: this.adminToken };
    const tenant = await this.request('POST', '/v1/admin/tenants', { ...admin, body: { name, ...(limits ? { limits } : {}) } });
    if (tenant.status !== 201) throw new Error(`creating a tenant failed: ${tenant.status} ${tenant.text}`);
    const key = await this.request('POST', `/v1/admin/tenants/${tenant.body.id}/api_keys`, { ...admin, body: {} });
    if (key.status !== 201) throw new Error(`issuing a key failed: ${key.status} ${key.text}`);
    return { tenantId: tenant.body.id, apiKey: key.body.key };
  }

  /** Polls GET /v1/runs/{id} until the run reaches one of `statuses` (bounded). */
  async waitForRun(key: string, runId: string, statuses = ['completed', 'failed', 'cancelled'], timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.request('GET', `/v1/runs/${runId}`, { key });
      if (statuses.includes(res.body?.status)) return res.body;
      if (Date.now() > deadline) throw new Error(`run ${runId} still ${res.body?.status} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Stops whatever did start (safe after a partial start); a second call does nothing. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.gateway?.close();
    if (this.gatewayChild) await stopProcess(this.gatewayChild);
    await this.stopExecutor();
    await removeExecutorResources(this.executorId);
    await this.nats?.stop();
    await this.db?.drop();
  }
}
