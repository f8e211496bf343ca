import { countExecutorResources, executorDisks } from '@app/testing';
import Docker from 'dockerode';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * A session cannot take more of the host's disk than RUNBOX_SANDBOX_DISK_MB: 1.5 GB written
 * in one session used to come straight off the filesystem Postgres and Docker share.
 */
describe('workspace disk limit, through the API', () => {
  const docker = new Docker();
  let stack: TestStack;
  let tenant: TenantCredentials;

  const terminal = (id: string, command: string) =>
    stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command } } });

  beforeAll(async () => {
    stack = await new TestStack({ env: { RUNBOX_SANDBOX_DISK_MB: '64' } }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('fails a write past the limit with "No space left on device", and deleting the session leaves nothing behind', async () => {
    const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    const df = await terminal(id, "df -k /workspace | tail -n 1 | awk '{print \"size=\" $2}'");
    expect(df.status).toBe(200);
    expect(Number(/size=(\d+)/.exec(df.body.output)?.[1])).toBeLessThanOrEqual(64 * 1024);

    const write = await terminal(id, 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo "exit=$?"; du -sm /workspace');
    expect(write.status).toBe(200);
    expect(write.body.output).toContain('No space left on device');
    expect(write.body.output).toContain('exit=1');
    const usedMb = Number(/(\d+)\s+\/workspace/.exec(write.body.output)?.[1]);
    expect(usedMb).toBeLessThanOrEqual(64);

    // The session's work goes on: a small file still fits once the big one is gone.
    const after = await terminal(id, 'rm /workspace/big && echo ok > /workspace/small && cat /workspace/small');
    expect(after.body.output).toContain('ok');

    expect((await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(204);
    expect((await docker.listVolumes({ filters: { label: [`runbox.session=${id}`] } })).Volumes ?? []).toHaveLength(0);
    expect(await countExecutorResources(stack.executorId)).toEqual({ containers: 0, volumes: 0 });
    expect(await executorDisks(stack.executorId)).toEqual({ images: [], loopDevices: [] });
  });
});
