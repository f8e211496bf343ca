import { loadConfig } from '@app/config';
import { INestApplication } from '@nestjs/common';
import Docker from 'dockerode';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createGateway } from '../apps/gateway/src/bootstrap';
import { TenantCredentials, TestStack } from './support/test-stack';

/** How long the slow image's agent sleeps before it serves: longer than a try gives a start (5 s). */
const AGENT_DELAY_SECONDS = 8;

/**
 * A sandbox that is slow to start (a busy host: here, an image whose agent sleeps before it
 * serves) is not a call that got no answer. The call's own limit (2 s) and the grace (1 s)
 * are both far shorter than the start, so before the start had a wait of its own the call
 * ran and was still reported as never answered. Now it runs once and answers; and past the
 * start timeout it is refused with nothing run while the start goes on.
 */
describe('a sandbox slow to start', () => {
  const docker = new Docker();
  const image = `runbox-sandbox-slowstart:${randomBytes(4).toString('hex')}`;
  let stack: TestStack;
  let tenant: TenantCredentials;
  /** A second gateway of the same deployment that gives a start 3 s in all. */
  let impatient: INestApplication | undefined;
  let impatientUrl = '';

  const session = async () => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
  const terminal = (sessionId: string, command: string, baseUrl?: string) =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command, timeout_seconds: 2 } }, baseUrl });
  const containersOf = async (sessionId: string) => docker.listContainers({ all: true, filters: { label: [`runbox.session=${sessionId}`] } });

  beforeAll(async () => {
    const base = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(__dirname, '..', 'deploy', 'sandbox', 'build.sh'), { encoding: 'utf8' }).trim();
    // The agent's `serve` (the container's command) sleeps first; its `attach` (the
    // executor's channel) waits for the socket as it always does. The grep fails the build
    // if the agent's entry point ever changes shape, rather than making a fast image.
    const dockerfile = [
      `FROM ${base}`,
      `RUN sed -i 's/^    if cmd == "serve":$/    if cmd == "serve":\\n        time.sleep(${AGENT_DELAY_SECONDS})/' /opt/runbox/runbox_agent.py && grep -q 'time.sleep(${AGENT_DELAY_SECONDS})' /opt/runbox/runbox_agent.py`,
    ].join('\n');
    execFileSync('docker', ['build', '-q', '-t', image, '-'], { input: dockerfile, env: { ...process.env, DOCKER_BUILDKIT: '0' }, stdio: ['pipe', 'ignore', 'pipe'] });
    stack = await new TestStack({ env: { RUNBOX_SANDBOX_IMAGE: image, RUNBOX_WARM_POOL_SIZE: '0', RUNBOX_EXECUTOR_GRACE_MS: '1000' } }).start();
    tenant = await stack.createTenant();
    const gateway = await createGateway(loadConfig({ ...stack.serviceEnv, RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: '3' }));
    impatient = gateway;
    await gateway.listen(0, '127.0.0.1');
    impatientUrl = `http://127.0.0.1:${(gateway.getHttpServer().address() as AddressInfo).port}`;
  }, 180_000);

  afterAll(async () => {
    await impatient?.close();
    await stack?.stop();
    await docker.getImage(image).remove().catch(() => undefined);
  });

  it('runs a first call that waited longer for its sandbox than its own limit and the grace, once', async () => {
    const id = await session();
    const first = await terminal(id, 'echo ran >> /workspace/runs.txt; echo done');
    expect(first.status).toBe(200);
    expect(first.body.output).toContain('done');
    const runs = await terminal(id, 'cat /workspace/runs.txt');
    expect(runs.body.output.match(/^ran$/gm)).toHaveLength(1);
    expect(await containersOf(id)).toHaveLength(1);
  });

  it('refuses a call whose sandbox is not ready within the start timeout with nothing run, and keeps starting that sandbox', async () => {
    const id = await session();
    const refused = await terminal(id, 'echo ran >> /workspace/once.txt', impatientUrl);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'executor_unavailable', message: expect.stringMatching(/was not ready within 3 s .*nothing ran/) });
    expect(refused.headers.get('retry-after')).toBe('5');
    // The next call (with the patient gateway) finds the same sandbox, and no trace of the refused one.
    const after = await terminal(id, 'cat /workspace/once.txt 2>/dev/null || echo nothing-there');
    expect(after.status).toBe(200);
    expect(after.body.output).toContain('nothing-there');
    expect(await containersOf(id)).toHaveLength(1);
  });
});
