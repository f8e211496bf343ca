import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { eventually, ScriptedModelServer } from '@app/testing';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text';
import { buildImages, ComposeProject } from './compose-stack';

// deploy/compose/compose.yaml brought up for real with the images `./runbox images` builds
// (cached by their inputs), on this machine's Docker engine, offline. The scripted model
// listens on the project network's bridge address, which only this machine reaches.
jest.setTimeout(20 * 60_000);

interface HttpAnswer {
  status: number;
  body: Record<string, unknown> & { data?: Array<Record<string, unknown>> };
}

// Its own executor id: the workspace disk images (and the loop devices behind them) are kept
// per executor id, so this run's are told apart from any other stack's.
const executorId = `exec-compose-${randomBytes(4).toString('hex')}`;

describe('the Compose stack', () => {
  const model = new ScriptedModelServer();
  const adminToken = randomBytes(16).toString('hex');
  let project: ComposeProject;
  let baseUrl = '';
  let downed = false;

  async function http(method: string, path: string, key: string, body?: unknown): Promise<HttpAnswer> {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {} };
  }

  beforeAll(async () => {
    const images = await buildImages();
    project = new ComposeProject({
      RUNBOX_IMAGE: images.RUNBOX_IMAGE!,
      RUNBOX_ENGINE_IMAGE: images.RUNBOX_ENGINE_IMAGE!,
      RUNBOX_POSTGRES_IMAGE: images.RUNBOX_POSTGRES_IMAGE!,
      RUNBOX_NATS_IMAGE: images.RUNBOX_NATS_IMAGE!,
      RUNBOX_DB_OWNER_PASSWORD: randomBytes(12).toString('hex'),
      RUNBOX_DB_APP_PASSWORD: randomBytes(12).toString('hex'),
      RUNBOX_DB_SYSTEM_PASSWORD: randomBytes(12).toString('hex'),
      RUNBOX_ADMIN_TOKEN: adminToken,
      RUNBOX_EXECUTOR_ID: executorId,
      // Empty: Docker picks a free loopback port.
      RUNBOX_HTTP_BIND: '127.0.0.1',
      RUNBOX_HTTP_PORT: '',
    });
    // The databases first: that makes the project's network, whose bridge address the model
    // server then listens on, before the gateway is created with its URL.
    await project.compose('up', '-d', 'postgres', 'nats');
    const modelUrl = await model.start(await project.hostAddress());
    project.setEnv({ RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_MODEL_API_KEY: 'sk-compose-test' });
    await project.compose('up', '-d');
    const published = await project.compose('port', 'gateway', '8080');
    baseUrl = `http://${published.split('\n')[0]}`;
    await eventually('the gateway to be ready', async () => {
      const ready = await http('GET', '/readyz', '').catch(() => undefined);
      return ready?.status === 200 ? ready : undefined;
    }, 240_000, 500);
  });

  afterAll(async () => {
    if (project && !downed) await project.down().catch(() => undefined);
    project?.removeEnvFile();
    await model.stop();
  });

  it('migrates, then serves a tenant a model run whose terminal call runs in the executor engine sandbox', async () => {
    const tenant = await http('POST', '/v1/admin/tenants', adminToken, { name: 'compose' });
    expect(tenant.status).toBe(201);
    const key = await http('POST', `/v1/admin/tenants/${tenant.body.id}/api_keys`, adminToken, {});
    expect(key.status).toBe(201);
    const apiKey = key.body.key as string;

    model.enqueue(
      { toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'echo compose-$((6 * 7)) as $(id -u)' } }] },
      (req) => ({ content: `sandbox: ${req.body.messages.find((m) => m.role === 'tool')?.content?.match(/compose-\d+ as \d+/)?.[0]}` }),
    );
    const created = await http('POST', '/v1/runs', apiKey, { input: 'Say hello from the Compose sandbox' });
    expect(created.status).toBe(202);
    const finished = await eventually('the run to finish', async () => {
      const res = await http('GET', `/v1/runs/${created.body.id}`, apiKey);
      return ['completed', 'failed', 'cancelled'].includes(res.body.status as string) ? res.body : undefined;
    }, 120_000, 250);
    expect(finished).toMatchObject({ status: 'completed', output: 'sandbox: compose-42 as 1000' });
    expect(model.requests[0]?.headers.authorization).toBe('Bearer sk-compose-test');

    // The sandbox ran in the executor's own engine, from the image the engine carries.
    const sandboxes = await project.compose('exec', '-T', 'engine', 'docker', '-H', 'unix:///run/runbox-engine/docker.sock',
      'ps', '--filter', `label=runbox.session=${created.body.session_id}`, '--format', '{{.Image}}');
    expect(sandboxes).toBe('runbox-sandbox:current');

    // The executor's own HTTP port (8081, inside its container) serves its metrics: the
    // session's sandbox is there, idle, with the engine calls that made it timed.
    const metrics = await project.compose('exec', '-T', 'executor', 'node', '-e',
      "fetch('http://127.0.0.1:8081/metrics').then((r) => r.text()).then((t) => process.stdout.write(t))");
    const samples = parsePrometheusText(metrics);
    expect(sampleValue(samples, 'runbox_executor_sandboxes', { executor: executorId, state: 'idle' })).toBe(1);
    expect(sampleValue(samples, 'runbox_executor_docker_api_duration_seconds_count', { executor: executorId, operation: 'POST /containers/create', outcome: 'ok' })).toBeGreaterThanOrEqual(1);

    // Deleting the session gives back its size-limited workspace: the volume, and the loop
    // device the engine mounted it from (a kernel object the host keeps until detached).
    expect(await workspaceLoopDevices()).not.toEqual([]);
    expect((await http('DELETE', `/v1/sessions/${created.body.session_id}`, apiKey)).status).toBe(204);
    expect(await workspaceLoopDevices()).toEqual([]);
  });

  it('serves the web console from the image, under its content security policy', async () => {
    const res = await fetch(`${baseUrl}/console`, { signal: AbortSignal.timeout(30_000) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await res.text()).toContain('/console/app.js');
    expect((await fetch(`${baseUrl}/console/app.js`, { signal: AbortSignal.timeout(30_000) })).status).toBe(200);
  });

  it("reports every long-running service healthy by its image's health check, the migration exited", async () => {
    const expected = { postgres: 'healthy', nats: 'healthy', engine: 'healthy', executor: 'healthy', gateway: 'healthy', migrate: 'exited 0' };
    const health = await eventually('every service healthy', async () => {
      const now = await project.health();
      return Object.values(now).includes('starting') ? undefined : now;
    }, 120_000, 1000);
    expect(health).toEqual(expected);
  });

  it('comes down leaving no container, volume or network behind', async () => {
    await project.down();
    downed = true;
    expect(await project.leftovers()).toEqual({ containers: '', volumes: '', networks: '' });
    expect(await workspaceLoopDevices()).toEqual([]);
  });
});

/** The host's loop devices backed by this stack's workspace images (`losetup -a` names the file). */
async function workspaceLoopDevices(): Promise<string[]> {
  const { stdout } = await promisify(execFile)('losetup', ['-a']);
  return stdout.split('\n').filter((line) => line.includes(`/${executorId}/`));
}
