import { eventually } from '@app/testing';
import Docker from 'dockerode';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * The channel into a sandbox is one exec of the agent's attach relay; the shell state and
 * jobs live in the container's main process. A restarted executor attaches again.
 */
describe('executor restart', () => {
  const docker = new Docker();
  let stack: TestStack;
  let tenant: TenantCredentials;

  const terminal = (sessionId: string, args: Record<string, unknown>) =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: args } });

  beforeAll(async () => {
    stack = await new TestStack().start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('keeps the shell state and a background job of a session across a restart of the executor', async () => {
    const id = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    expect((await terminal(id, { command: 'mkdir -p /tmp/here && cd /tmp/here && export SURVIVES=restart' })).status).toBe(200);
    // The job waits for a file the test creates only after the restart: it must outlive it.
    const job = await terminal(id, { command: 'while [ ! -e /workspace/go ]; do sleep 0.2; done; echo job-finished', max_wait_ms: 250 });
    expect(job.body.metadata.background).toBe(true);
    const jobStatus = async () => {
      const res = await terminal(id, { command: `cat ${job.body.metadata.status_file}` });
      return JSON.parse(res.body.output.split('stdout:\n')[1]) as { status: string; exit_code?: number };
    };
    const [before] = await docker.listContainers({ filters: { label: [`runbox.session=${id}`] } });

    await stack.stopExecutor();
    const whileDown = await terminal(id, { command: 'true' });
    expect(whileDown.status).toBe(503);
    expect(whileDown.body.error.code).toBe('executor_unavailable');

    await stack.startExecutor();
    const after = await terminal(id, { command: 'echo "$PWD $SURVIVES"' });
    expect(after.status).toBe(200);
    expect(after.body.output).toContain('/tmp/here restart');
    const [same] = await docker.listContainers({ filters: { label: [`runbox.session=${id}`] } });
    expect(same.Id).toBe(before.Id);

    expect((await jobStatus()).status).toBe('running');

    expect((await terminal(id, { command: 'touch /workspace/go' })).status).toBe(200);
    const status = await eventually('the job started before the restart to finish', async () => {
      const json = await jobStatus();
      return json.status === 'exited' ? json : undefined;
    });
    expect(status.exit_code).toBe(0);
    const out = await terminal(id, { command: `cat ${job.body.metadata.stdout_file}` });
    expect(out.body.output).toContain('job-finished');
  });
});
