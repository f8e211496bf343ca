import { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { loadConfig, RunboxConfig } from '@app/config';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { ExecutorModule } from '../../apps/executor/src/executor.module';
import { createGateway } from '../../apps/gateway/src/bootstrap';
import { createTestDatabase, removeExecutorResources, TestDatabase } from '@app/testing';
import { startNats, TestNats } from '@app/testing';

export { removeExecutorResources };

export interface StackOptions {
  /** Extra environment, as an operator would set it. */
  env?: Record<string, string>;
  /** Start an executor too (default true). */
  executor?: boolean;
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
  private gateway?: { close(): Promise<void> };
  private executor?: INestApplicationContext;

  constructor(private readonly options: StackOptions = {}) {}

  async start(): Promise<this> {
    this.nats = await startNats();
    this.db = await createTestDatabase();
    this.config = loadConfig({
      DATABASE_URL: this.db.url,
      NATS_URL: this.nats.url,
      RUNBOX_ADMIN_TOKEN: this.adminToken,
      RUNBOX_EXECUTOR_ID: this.executorId,
      RUNBOX_LOG_LEVEL: process.env.RUNBOX_TEST_LOG_LEVEL ?? 'silent',
      // The exact image `./runbox test` built for this tree, not whatever :latest points at.
      ...(process.env.RUNBOX_SANDBOX_IMAGE ? { RUNBOX_SANDBOX_IMAGE: process.env.RUNBOX_SANDBOX_IMAGE } : {}),
      PORT: '0',
      ...this.options.env,
    });
    if (this.options.executor !== false) await this.startExecutor();
    const app = await createGateway(this.config);
    await app.listen(0, '127.0.0.1');
    this.gateway = app;
    this.url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    return this;
  }

  async startExecutor(): Promise<void> {
    this.executor = await NestFactory.createApplicationContext(ExecutorModule.forRoot(this.config), { logger: false });
    await this.executor.init();
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
  async request(method: string, path: string, options: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}) {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.url}${path}`, { method, headers, body });
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, body: json, text };
  }

  async createTenant(name = `tenant-${randomBytes(4).toString('hex')}`): Promise<TenantCredentials> {
    const admin = { key: this.adminToken };
    const tenant = await this.request('POST', '/v1/admin/tenants', { ...admin, body: { name } });
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

  /** Safe after a partial start: stops whatever did start. */
  async stop(): Promise<void> {
    await this.gateway?.close();
    await this.stopExecutor();
    await removeExecutorResources(this.executorId);
    await this.nats?.stop();
    await this.db?.drop();
  }
}
