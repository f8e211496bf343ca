import { countExecutorResources, eventually } from '@app/testing';
import Docker from 'dockerode';
import pino from 'pino';
import { DockerSandboxDriver } from '../src/sandbox/docker-sandbox.driver';
import { PooledSandbox, SandboxPool } from '../src/sandbox/sandbox-pool';
import { SandboxQuotaError } from '../src/sandbox/sandbox-quota';
import { SandboxService } from '../src/sandbox/sandbox.service';
import { ExecutorHarness } from './support/executor-harness';

/** The warm pool against the real Docker engine: hand-out, binding, refill, restart. */
describe('warm pool', () => {
  const docker = new Docker();
  let harness: ExecutorHarness;

  const poolContainers = async () =>
    docker.listContainers({ all: true, filters: { label: [`runbox.executor=${harness.executorId}`, 'runbox.pool=true'] } });

  beforeAll(async () => {
    harness = await new ExecutorHarness({ RUNBOX_WARM_POOL_SIZE: '2', RUNBOX_SANDBOX_SWEEP_SECONDS: '3600' }).start();
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('fills up to its size with hardened containers labelled runbox.pool=true', async () => {
    await eventually('a full pool', async () => harness.get(SandboxPool).ready === 2);
    const containers = await poolContainers();
    expect(containers).toHaveLength(2);
    const info = await docker.getContainer(containers[0].Id).inspect();
    // Same hardening as any sandbox: the agent as root with three capabilities, tools as 1000.
    expect(info.Config.User).toBe('0:0');
    expect(info.Config.Env).toContain('RUNBOX_TOOL_USER=1000:1000');
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    expect([...(info.HostConfig.CapAdd ?? [])].sort()).toEqual(['KILL', 'SETGID', 'SETUID']);
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(info.Config.Labels['runbox.session']).toBeUndefined();
  });

  it('hands a warm container to a new session, binds it in the sandboxes row, and refills', async () => {
    const before = new Set((await poolContainers()).map((c) => c.Id));
    const session = await harness.newSession();
    const result = await harness.terminal(session, 'export POOLED=yes; cd /tmp; echo ready');
    expect(result.output).toContain('ready');

    // Labels cannot change after creation: the binding lives in the row.
    const row = await harness.sandboxRow(session.sessionId);
    expect(row).toMatchObject({ state: 'ready', tenant_id: session.tenantId, executor_id: harness.executorId });
    expect(before.has(row!.container_id!)).toBe(true);
    const info = await docker.getContainer(row!.container_id!).inspect();
    expect(info.Config.Labels['runbox.pool']).toBe('true');
    expect(info.Config.Labels['runbox.session']).toBeUndefined();

    await eventually('the pool refilled', async () => harness.get(SandboxPool).ready === 2);
    expect(await poolContainers()).toHaveLength(3);
  });

  it('keeps a handed-out pool container through a sweep and an executor restart', async () => {
    const session = await harness.newSession();
    await harness.terminal(session, 'cd /tmp && export KEPT=through-restart');
    const { container_id: containerId } = (await harness.sandboxRow(session.sessionId))!;

    await harness.get(SandboxService).sweep();
    expect((await docker.getContainer(containerId!).inspect()).State.Running).toBe(true);

    await harness.stopExecutor();
    // A stopping executor removes the containers still waiting in its pool; bound ones stay.
    const left = (await poolContainers()).map((c) => c.Id);
    expect(left).toContain(containerId);
    expect(left).toHaveLength(2);

    await harness.startExecutor();
    const after = await harness.terminal(session, 'echo "$PWD $KEPT"');
    expect(after.output).toContain('/tmp through-restart');
    expect((await harness.sandboxRow(session.sessionId))!.container_id).toBe(containerId);
    await eventually('the new pool', async () => harness.get(SandboxPool).ready === 2);
  });

  it('a session whose sandbox comes from the pool does not see another session\'s state', async () => {
    const first = await harness.newSession();
    const second = await harness.newSession();
    await harness.terminal(first, 'export SECRET=first-only; echo x > /workspace/first.txt');
    const seen = await harness.terminal(second, 'echo "[$SECRET]"; ls /workspace');
    expect(seen.output).toContain('[]');
    expect(seen.output).not.toContain('first.txt');
  });

  it('refuses a warm container to a tenant at max_sandboxes, keeps it in the pool, and binds it once there is room', async () => {
    const [{ live }] = await harness.sql<{ live: number }>(
      `SELECT count(*)::int AS live FROM sandboxes WHERE tenant_id = $1 AND state IN ('creating', 'ready')`,
      [harness.tenantId],
    );
    await harness.sql(`UPDATE tenants SET limits = jsonb_build_object('max_sandboxes', $2::int) WHERE id = $1`, [harness.tenantId, live]);
    // A warm one waiting, so the call takes the pool's path (a refill may take a while on a busy host).
    await eventually('a warm container', async () => harness.get(SandboxPool).ready > 0, 120_000);
    const pooled = new Set((await poolContainers()).map((c) => c.Id));
    const session = await harness.newSession();
    await expect(harness.terminal(session, 'true')).rejects.toBeInstanceOf(SandboxQuotaError);
    expect(await harness.sandboxRow(session.sessionId)).toBeUndefined();
    // Given back, not thrown away: every pool container is still there.
    const after = new Set((await poolContainers()).map((c) => c.Id));
    for (const id of pooled) expect(after.has(id)).toBe(true);

    await harness.sql(`UPDATE tenants SET limits = jsonb_build_object('max_sandboxes', $2::int) WHERE id = $1`, [harness.tenantId, live + 1]);
    await eventually('a warm container', async () => harness.get(SandboxPool).ready > 0, 120_000);
    expect((await harness.terminal(session, 'echo bound')).output).toContain('bound');
    const row = await harness.sandboxRow(session.sessionId);
    expect(row).toMatchObject({ state: 'ready', tenant_id: harness.tenantId, executor_id: harness.executorId });
    expect(new Set((await poolContainers()).map((c) => c.Id)).has(row!.container_id!)).toBe(true);
    await harness.sql(`UPDATE tenants SET limits = '{}' WHERE id = $1`, [harness.tenantId]);
  });

  it('leaves no container or volume once its sessions are deleted and the executor stops', async () => {
    await harness.deleteSessionsAndStopExecutor();
    expect(await countExecutorResources(harness.executorId)).toEqual({ containers: 0, volumes: 0 });
  });
});

/**
 * Sizing by demand, on the real engine. The pool is made here with its own clock, so an
 * idle window passes when the test says so rather than by waiting.
 */
describe('warm pool sized by demand', () => {
  const docker = new Docker();
  const idleMs = 60_000;
  let harness: ExecutorHarness;
  let pool: SandboxPool;
  let clock = 0;
  let room = 100;
  const taken: PooledSandbox[] = [];

  const poolContainers = async () =>
    (await docker.listContainers({ all: true, filters: { label: [`runbox.executor=${harness.executorId}`, 'runbox.pool=true'] } })).map((c) => c.Id);

  beforeAll(async () => {
    harness = await new ExecutorHarness({ RUNBOX_SANDBOX_SWEEP_SECONDS: '3600' }).start();
    pool = new SandboxPool({ min: 1, max: 4, idleMs }, harness.get(DockerSandboxDriver), pino({ level: 'silent' }), { now: () => clock });
    pool.start(() => room);
  });

  afterAll(async () => {
    const driver = harness?.get(DockerSandboxDriver);
    await Promise.all(taken.map((s) => (s.channel.close('test over'), driver?.remove(s))));
    await pool?.drain();
    await harness?.stop();
  });

  it('keeps its minimum while nobody asks', async () => {
    await eventually('the minimum', async () => pool.ready === 1);
    expect(pool.target).toBe(1);
    expect(await poolContainers()).toHaveLength(1);
  });

  it('grows when sessions come faster than it refills, up to its maximum', async () => {
    // A burst: one hand-out empties it, the next four find nothing ready.
    for (let i = 0; i < 5; i++) {
      const sandbox = pool.take();
      if (sandbox) taken.push(sandbox);
    }
    expect(taken).toHaveLength(1);
    expect(pool.target).toBe(4);
    await eventually('a pool of four', async () => pool.ready === 4, 120_000);
    expect(await poolContainers()).toHaveLength(5); // four waiting, one handed out
  });

  it('halves toward its minimum after an idle window, removing what it no longer needs', async () => {
    const waiting = new Set((await poolContainers()).filter((id) => id !== taken[0].containerId));
    clock += idleMs - 1;
    pool.trim();
    expect(pool.ready).toBe(4);
    clock += 1;
    pool.trim();
    expect(pool.target).toBe(2);
    expect(pool.ready).toBe(2);
    await eventually('two waiting containers removed', async () => (await poolContainers()).filter((id) => waiting.has(id)).length === 2);
    clock += idleMs;
    pool.trim();
    expect(pool.target).toBe(1);
    await eventually('one left waiting', async () => (await poolContainers()).filter((id) => waiting.has(id)).length === 1);
  });

  it('holds no more than the executor has room for', async () => {
    room = 0;
    pool.trim();
    expect(pool.target).toBe(0);
    expect(pool.ready).toBe(0);
    expect(pool.take()).toBeUndefined();
    await eventually('no container waiting', async () => (await poolContainers()).every((id) => id === taken[0].containerId));
  });
});
