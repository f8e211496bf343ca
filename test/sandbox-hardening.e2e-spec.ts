import { eventually, queryDatabase } from '@app/testing';
import Docker from 'dockerode';
import { SandboxPool } from '../apps/executor/src/sandbox/sandbox-pool';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * Every hardening rule of a session container, read back twice: from Docker's own
 * inspect, and from inside the container through the terminal tool. Twice over: for a
 * container made for the session, and for one a new session took from the warm pool,
 * which must not differ in any of it.
 */
describe.each([
  ['made for the session', { RUNBOX_WARM_POOL_SIZE: '0' }],
  ['taken from the warm pool', { RUNBOX_WARM_POOL_SIZE: '1' }],
])('sandbox hardening, container %s', (how, poolEnv) => {
  const warm = poolEnv.RUNBOX_WARM_POOL_SIZE !== '0';
  const docker = new Docker();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;
  let info: Docker.ContainerInspectInfo;

  const terminal = async (command: string) => {
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command } } });
    expect(res.status).toBe(200);
    return res.body as { output: string; metadata: Record<string, unknown>; is_error: boolean };
  };

  beforeAll(async () => {
    stack = await new TestStack({ env: { RUNBOX_SANDBOX_MEMORY_MB: '256', RUNBOX_SANDBOX_CPUS: '0.5', RUNBOX_SANDBOX_PIDS: '128', ...poolEnv } }).start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    expect((await stack.request('GET', `/v1/sessions/${sessionId}`, { key: tenant.apiKey })).body.sandbox.state).toBe('none');
    if (warm) await eventually('a warm container', async () => stack.executorProvider(SandboxPool).ready === 1, 120_000);
    await terminal('true');
    // The row binds a session to its container either way (a pool container has no session label).
    const [row] = await queryDatabase<{ container_id: string }>(stack.db.url, 'SELECT container_id FROM sandboxes WHERE session_id = $1', [sessionId]);
    info = await docker.getContainer(row.container_id).inspect();
  });

  it(`is a container ${how}`, () => {
    if (warm) {
      expect(info.Config.Labels['runbox.pool']).toBe('true');
    } else {
      expect(info.Config.Labels['runbox.session']).toBe(sessionId);
      expect(info.Config.Labels['runbox.tenant']).toBe(tenant.tenantId);
    }
  });

  it('starts in an empty /workspace of its own, with nothing left in /tmp but the agent\'s state', async () => {
    const result = await terminal("pwd; find /workspace /tmp -mindepth 1 -maxdepth 1 ! -name .runbox ! -name runbox; df --output=target /workspace | tail -1");
    expect(result.output).toMatch(/stdout:\n\/workspace\n\/workspace\n?$/);
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('reports the sandbox ready on the session', async () => {
    const session = await stack.request('GET', `/v1/sessions/${sessionId}`, { key: tenant.apiKey });
    expect(session.body.sandbox).toEqual({ state: 'ready' });
  });

  it('inspects as the agent (root) with three capabilities, no new privileges, read-only root, limited', () => {
    // The agent's identity; every tool process runs as 1000:1000 with none (next tests).
    expect(info.Config.User).toBe('0:0');
    expect(info.Config.Env).toContain('RUNBOX_TOOL_USER=1000:1000');
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    expect([...(info.HostConfig.CapAdd ?? [])].sort()).toEqual(['KILL', 'SETGID', 'SETUID']);
    expect(info.HostConfig.Privileged).toBe(false);
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(Object.keys(info.HostConfig.Tmpfs ?? {}).sort()).toEqual(['/run/runbox', '/tmp']);
    expect(info.HostConfig.Tmpfs?.['/run/runbox']).toContain('mode=0700');
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
    // Memory plus swap equal to memory: no swap at all.
    expect(info.HostConfig.MemorySwap).toBe(info.HostConfig.Memory);
    expect(info.HostConfig.Init).toBe(true);
    expect(info.HostConfig.NanoCpus).toBe(500_000_000);
    expect(info.HostConfig.PidsLimit).toBe(128);
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(info.Config.WorkingDir).toBe('/workspace');
  });

  it('mounts only its workspace volume, and never the Docker socket', () => {
    const mounts = info.Mounts.map((m) => ({ type: m.Type, destination: m.Destination, rw: m.RW }));
    expect(mounts).toEqual([{ type: 'volume', destination: '/workspace', rw: true }]);
    expect(JSON.stringify(info.Mounts)).not.toContain('docker.sock');
    expect(info.HostConfig.Binds ?? []).toEqual([]);
  });

  it('runs tool processes as uid 1000 with no capabilities at all', async () => {
    const result = await terminal('id -u; grep -E "^Cap(Prm|Eff|Amb)" /proc/self/status');
    expect(result.output).toMatch(/stdout:\n1000\nCapPrm:\s+0000000000000000\nCapEff:\s+0000000000000000\nCapAmb:\s+0000000000000000/);
  });

  it('runs docker-init as PID 1 with the agent as its child, so orphans are reaped', async () => {
    const result = await terminal("cat /proc/1/comm; ps -C python3 -o ppid=,args= | grep '[r]unbox_agent.py serve'");
    expect(result.output).toMatch(/stdout:\ndocker-init\n\s*1 python3 -u \/opt\/runbox\/runbox_agent\.py serve$/m);
  });

  it('sees only the loopback interface', async () => {
    const result = await terminal('ls /sys/class/net');
    expect(result.output).toMatch(/stdout:\nlo$/);
  });

  it('cannot write to the root filesystem, only to /workspace and /tmp', async () => {
    const result = await terminal('touch /usr/x; echo "usr=$?"; touch /workspace/x && echo ws=ok; touch /tmp/x && echo tmp=ok');
    expect(result.output).toContain('usr=1');
    expect(result.output).toContain('Read-only file system');
    expect(result.output).toContain('ws=ok');
    expect(result.output).toContain('tmp=ok');
  });

  it('has no Docker socket and cannot gain privileges', async () => {
    const result = await terminal('test -e /var/run/docker.sock && echo sock=present || echo sock=absent; grep NoNewPrivs /proc/self/status');
    expect(result.output).toContain('sock=absent');
    expect(result.output).toMatch(/NoNewPrivs:\s+1/);
  });

  it('takes no image, working directory, mount or capability from a request', async () => {
    for (const extra of [{ image: 'alpine' }, { cwd: '/' }, { mounts: ['/:/host'] }, { cap_add: ['SYS_ADMIN'] }]) {
      const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, {
        key: tenant.apiKey,
        body: { arguments: { command: 'true', ...extra } },
      });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
  });
});
