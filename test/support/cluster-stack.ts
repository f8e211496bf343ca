import { randomBytes } from 'node:crypto';
import { freePort, removeExecutorResources, ScriptedModelServer, startOrUndo, TestNatsCluster } from '@app/testing';
import { PrivatePostgres } from './private-postgres';
import { ServiceProcess } from './service-process';

export interface ClusterStackOptions {
  gateways?: number;
  /** Extra environment for every service. */
  env?: Record<string, string>;
}

/**
 * Runbox scaled out on one machine, every part a real process: a three-node NATS JetStream
 * cluster, a PostgreSQL server of its own (so it can be restarted), several gateways and an
 * executor started from dist/, and a scripted model server. Faults are injected by pid.
 * `stop()` ends every process it started and removes the executor's containers and volumes.
 */
export class ClusterStack {
  readonly adminToken = `admin-${randomBytes(12).toString('hex')}`;
  readonly executorId = `chaos-${randomBytes(5).toString('hex')}`;
  readonly model = new ScriptedModelServer();
  readonly nats = new TestNatsCluster(3);
  readonly postgres = new PrivatePostgres();
  gateways: ServiceProcess[] = [];
  executor!: ServiceProcess;
  private stopped = false;

  constructor(private readonly options: ClusterStackOptions = {}) {}

  start(): Promise<this> {
    return startOrUndo(() => this.startParts(), () => this.stop());
  }

  private async startParts(): Promise<this> {
    const [modelUrl] = await Promise.all([this.model.start(), this.nats.start(), this.postgres.start()]);
    const env: Record<string, string> = {
      DATABASE_URL: this.postgres.appUrl,
      SYSTEM_DATABASE_URL: this.postgres.systemUrl,
      NATS_URL: this.nats.url,
      RUNBOX_NATS_STREAM_REPLICAS: '3',
      RUNBOX_ADMIN_TOKEN: this.adminToken,
      RUNBOX_MODEL_BASE_URL: modelUrl,
      RUNBOX_MODEL: 'scripted-1',
      RUNBOX_EXECUTOR_ID: this.executorId,
      // Any free port: other suites' executors run beside this one.
      RUNBOX_EXECUTOR_HTTP_PORT: '0',
      // The workspace size limit is not what these tests are about: no loop devices.
      RUNBOX_SANDBOX_DISK_MB: '0',
      ...(process.env.RUNBOX_SANDBOX_IMAGE ? { RUNBOX_SANDBOX_IMAGE: process.env.RUNBOX_SANDBOX_IMAGE } : {}),
      ...this.options.env,
    };
    this.executor = new ServiceProcess('executor', 'executor', env);
    await this.executor.start();
    for (let i = 0; i < (this.options.gateways ?? 3); i++) {
      const port = await freePort();
      this.gateways.push(new ServiceProcess('gateway', `gateway-${i + 1}`, { ...env, PORT: String(port) }, `http://127.0.0.1:${port}`));
    }
    // One at a time: the first creates the run stream, and start-up is CPU-heavy.
    for (const gateway of this.gateways) await gateway.start();
    return this;
  }

  /** The gateway whose process holds the run's lease now (lease owners start with `<host>-<pid>-`), if any. */
  async gatewayRunning(runId: string): Promise<ServiceProcess | undefined> {
    const [row] = await this.postgres.query<{ lease_owner: string | null }>('SELECT lease_owner FROM runs WHERE id = $1', [runId]);
    const pid = Number(/-(\d+)-[0-9a-f]+\//.exec(row?.lease_owner ?? '')?.[1]);
    return this.gateways.find((g) => g.running && g.pid === pid);
  }

  /** Every service process that should be running and is not: a test ends with none. */
  get exited(): string[] {
    return [this.executor, ...this.gateways].filter((s) => !s.running).map((s) => s.name);
  }

  async createTenant(): Promise<string> {
    const gateway = this.gateways.find((g) => g.running)!;
    const admin = { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' };
    const tenant = await fetch(`${gateway.url}/v1/admin/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ name: `chaos-${randomBytes(3).toString('hex')}` }) });
    if (tenant.status !== 201) throw new Error(`creating a tenant failed: ${tenant.status} ${await tenant.text()}`);
    const { id } = (await tenant.json()) as { id: string };
    const key = await fetch(`${gateway.url}/v1/admin/tenants/${id}/api_keys`, { method: 'POST', headers: admin, body: '{}' });
    if (key.status !== 201) throw new Error(`issuing a key failed: ${key.status} ${await key.text()}`);
    return ((await key.json()) as { key: string }).key;
  }

  /** Output of every service, for a failing test's message. */
  get output(): string {
    return [this.executor, ...this.gateways].map((s) => `--- ${s.name}\n${s.output.slice(-12_000)}`).join('\n');
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.gateways.map((g) => g.kill('SIGTERM')));
    await this.executor?.kill('SIGTERM');
    await removeExecutorResources(this.executorId);
    await this.model.stop();
    await this.nats.stop();
    await this.postgres.stop();
  }
}
