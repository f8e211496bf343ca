import { toolCallContract } from '@app/contracts';
import { createLogger } from '@app/logging';
import { NatsClient } from '@app/messaging';
import { eventually, queryDatabase } from '@app/testing';
import Docker from 'dockerode';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { killProcessesMarked, processesMarked } from '../apps/executor/src/sandbox/local/host-processes';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * The unsafe `local` backend: the same agent as a process on the executor host, chosen by
 * the deployment (RUNBOX_SANDBOX_BACKEND=local) and allowed only with the explicit flag.
 */
describe('local backend', () => {
  const docker = new Docker();
  // Short: the agent's Unix socket path must fit in 107 bytes.
  const root = mkdtempSync('/tmp/rbx-local-');
  let stack: TestStack;
  let tenant: TenantCredentials;

  const terminal = async (sessionId: string, args: Record<string, unknown>) => {
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: args } });
    expect(res.status).toBe(200);
    return res.body as { output: string; metadata: Record<string, any>; is_error: boolean };
  };
  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  /** Every process of the session: its agent and whatever the agent started. */
  const processesOf = (sessionId: string) =>
    processesMarked(`RUNBOX_AGENT_SOCKET=${join(root, stack.executorId, sessionId, 'agent', 'agent.sock')}`);
  const agentOf = async (sessionId: string) => (await processesOf(sessionId)).filter(isAgentServe);

  beforeAll(async () => {
    stack = await new TestStack({
      env: { RUNBOX_SANDBOX_BACKEND: 'local', RUNBOX_UNSAFE_LOCAL_BACKEND: '1', RUNBOX_LOCAL_WORKSPACES: root },
    }).start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
    // Local agents outlive their executor on purpose; this test started them, so it ends them.
    await killProcessesMarked(`RUNBOX_AGENT_SOCKET=${root}/`, { prefix: true });
    rmSync(root, { recursive: true, force: true });
  });

  it('runs commands on the host in the session directory, with state kept and no container', async () => {
    const id = await newSession();
    const workspace = join(root, stack.executorId, id, 'workspace');
    const first = await terminal(id, { command: 'pwd; mkdir -p sub && cd sub && export LOCAL_VAR=kept' });
    expect(first.output).toContain(workspace);
    const second = await terminal(id, { command: 'echo "$PWD $LOCAL_VAR"' });
    expect(second.output).toContain(`${workspace}/sub kept`);

    expect(await docker.listContainers({ all: true, filters: { label: [`runbox.executor=${stack.executorId}`] } })).toHaveLength(0);
    const [row] = await queryDatabase(stack.db.url, 'SELECT backend, state FROM sandboxes WHERE session_id = $1', [id]);
    expect(row).toEqual({ backend: 'local', state: 'ready' });
    expect((await stack.request('GET', `/v1/sessions/${id}`, { key: tenant.apiKey })).body.sandbox.state).toBe('ready');
  });

  it("gives commands none of the executor's own environment (no database URL, no keys)", async () => {
    const id = await newSession();
    const result = await terminal(id, { command: 'env | grep -c -e DATABASE_URL -e NATS_URL -e RUNBOX_ADMIN_TOKEN || true' });
    expect(result.output).toMatch(/stdout:\n0/);
  });

  it('reconnects to the same agent after an executor restart, with its state and jobs', async () => {
    const id = await newSession();
    await terminal(id, { command: 'cd /tmp && export ACROSS=restart' });
    const job = await terminal(id, { command: 'sleep 1; echo local-job-done', max_wait_ms: 250 });
    expect(job.metadata.background).toBe(true);
    const agent = await agentOf(id);
    expect(agent).toHaveLength(1);

    await stack.stopExecutor();
    await stack.startExecutor();
    const after = await terminal(id, { command: 'echo "$PWD $ACROSS"' });
    expect(after.output).toContain('/tmp restart');
    const status = await eventually('the local job', async () => {
      const res = await terminal(id, { command: `cat ${job.metadata.status_file}` });
      const json = JSON.parse(res.output.split('stdout:\n')[1]);
      return json.status === 'exited' ? json : undefined;
    });
    expect(status.exit_code).toBe(0);
    // The same agent process served the calls before and after the restart.
    expect(await agentOf(id)).toEqual(agent);
  });

  it('DELETE stops the agent and its jobs and removes the session directory', async () => {
    const id = await newSession();
    await terminal(id, { command: 'sleep 300', max_wait_ms: 250 });
    const dir = join(root, stack.executorId, id);
    expect(existsSync(dir)).toBe(true);
    expect(await agentOf(id)).toHaveLength(1);
    expect((await processesOf(id)).length).toBeGreaterThanOrEqual(2);
    expect((await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(204);
    expect(existsSync(dir)).toBe(false);
    expect(await processesOf(id)).toEqual([]);
  });
});

describe('local backend without the unsafe flag', () => {
  let stack: TestStack;
  let nats: NatsClient;

  beforeAll(async () => {
    stack = await new TestStack().start();
    nats = await NatsClient.connect(stack.nats.url, 'local-backend-test', createLogger({ service: 'test', level: 'silent' }));
  });

  afterAll(async () => {
    await nats?.connection.close();
    await stack?.stop();
  });

  it('is refused by the executor with a message that names the flag', async () => {
    const tenant = await stack.createTenant();
    const session = await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} });
    const reply = await nats.request(
      toolCallContract,
      {
        tenant_id: tenant.tenantId,
        session_id: session.body.id,
        call_id: 'c1',
        tool: 'terminal',
        arguments: { command: 'id' },
        max_output_chars: 1000,
        timeout_ms: 10_000,
        backend: 'local',
      },
      { timeoutMs: 10_000 },
    );
    expect(reply.ok).toBe(false);
    if (reply.ok) return;
    expect(reply.error.code).toBe('backend_disabled');
    expect(reply.error.message).toContain('RUNBOX_UNSAFE_LOCAL_BACKEND=1');
    const [row] = await queryDatabase(stack.db.url, 'SELECT count(*)::int AS n FROM sandboxes');
    expect(row.n).toBe(0);
  });
});

function isAgentServe(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('runbox_agent.py\0serve');
  } catch {
    return false; // exited meanwhile
  }
}
