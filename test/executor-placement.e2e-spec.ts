import { INestApplication } from '@nestjs/common';
import { loadConfig } from '@app/config';
import { eventually, queryDatabase, RecordedRequest, removeExecutorResources, ScriptedModelServer } from '@app/testing';
import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { createGateway } from '../apps/gateway/src/bootstrap';
import { RunWorkers } from '../apps/gateway/src/runs/run-workers';
import { DockerEngine } from './support/docker-engines';
import { ExecutorProcess } from './support/executor-processes';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * Several executors, each on a Docker engine of its own (the host's and two more dockerd
 * processes), behind the gateway: placement by free room, an executor killed and back, the
 * loss grace and its policies, a SIGTERM drain, decommissioning and a rolling restart.
 * Heartbeats are fast (0.2 s, so an executor is lost after 0.6 s). The main gateway's grace
 * is long enough for an executor to restart on a busy machine; the test of the grace itself
 * uses gateways of its own with a short one.
 */
const HEARTBEAT_SECONDS = 0.2;
const GRACE_SECONDS = 60;
const SHORT_GRACE_SECONDS = 3;

describe('executors on their own Docker engines', () => {
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? 'runbox-sandbox:latest';
  let engines: DockerEngine[] = [];
  let stack: TestStack;
  let tenant: TenantCredentials;
  /** More gateways of the same deployment, with their own loss settings; closed by the test that made them. */
  const gateways: INestApplication[] = [];
  const model = new ScriptedModelServer();
  const executors = new Map<string, ExecutorProcess>();
  /**
   * Executor ids of this run: executors on the host's engine are told apart by their id
   * alone, and a concurrent run of this suite (another checkout on the same machine) must
   * not sweep or remove this one's containers as its own.
   */
  const runTag = randomBytes(3).toString('hex');
  const ex = (name: string): string => `${name}-${runTag}`;
  const engineOf = new Map<string, Docker>();

  beforeAll(async () => {
    const started = Date.now();
    engines = await Promise.all([DockerEngine.start(), DockerEngine.start()]);
    const enginesUp = Date.now();
    await Promise.all(engines.map((e) => e.loadImage(image)));
    const imagesIn = Date.now();
    const modelUrl = await model.start();
    stack = await new TestStack({
      executor: false,
      env: {
        RUNBOX_MODEL_BASE_URL: modelUrl,
        RUNBOX_MODEL: 'scripted-1',
        RUNBOX_EXECUTOR_HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS),
        RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS: String(GRACE_SECONDS),
        // The extra engines have no loop devices set aside for workspace disks.
        RUNBOX_SANDBOX_DISK_MB: '0',
      },
    }).start();
    tenant = await stack.createTenant();
    process.stdout.write(
      `[placement] two extra engines up in ${enginesUp - started} ms; sandbox image loaded into both in ${imagesIn - enginesUp} ms; stack ready after ${Date.now() - started} ms\n`,
    );
  }, 300_000);

  // Up to 300 s, as the set-up: on a busy machine stopping two engines and removing nineteen
  // executors' containers and volumes has taken longer than 120 s.
  afterAll(async () => {
    const started = Date.now();
    await Promise.all([...executors.values()].map((executor) => executor.stop()));
    await Promise.all(gateways.map((gateway) => gateway.close()));
    const stopped = Date.now();
    // Nineteen executors' leftovers on the host's engine: removed side by side, not one after another.
    await Promise.all([...executors.keys()].map((id) => removeExecutorResources(id)));
    const removed = Date.now();
    await stack?.stop();
    await Promise.all(engines.map((e) => e.stop()));
    await model.stop();
    process.stdout.write(
      `[placement] executors and gateways stopped in ${stopped - started} ms; their containers and volumes removed in ${removed - stopped} ms; stack and engines stopped in ${Date.now() - removed} ms\n`,
    );
  }, 300_000);

  const admin = () => ({ key: stack.adminToken });
  const listed = async (baseUrl?: string) => (await stack.request('GET', '/v1/admin/executors', { ...admin(), baseUrl })).body.data as Array<{ id: string; standing: string; state: string; sandboxes: number }>;
  const isServing = async (id: string) => (await listed()).some((e) => e.id === id && e.standing === 'serving' && e.state === 'ready');

  /** Starts an executor on engine `engine` (0: the host's; 1, 2: the extra ones). */
  async function startExecutor(id: string, engine: 0 | 1 | 2, capacity = 10): Promise<ExecutorProcess> {
    const docker = engine === 0 ? new Docker() : engines[engine - 1].client;
    const env: Record<string, string> = { ...stack.serviceEnv, RUNBOX_EXECUTOR_MAX_SANDBOXES: String(capacity), RUNBOX_SANDBOX_IMAGE: image };
    if (engine > 0) env.DOCKER_HOST = engines[engine - 1].host;
    const executor = executors.get(id) ?? new ExecutorProcess(id, env);
    executors.set(id, executor);
    engineOf.set(id, docker);
    await executor.start(isServing);
    return executor;
  }

  async function stopAll(): Promise<void> {
    for (const executor of executors.values()) await executor.stop();
    for (const gateway of gateways.splice(0)) await gateway.close();
  }

  /** Another gateway, with these settings over the stack's; its URL. */
  async function startGateway(env: Record<string, string>): Promise<string> {
    const gateway = await createGateway(loadConfig({ ...stack.serviceEnv, ...env }));
    gateways.push(gateway);
    await gateway.listen(0, '127.0.0.1');
    return `http://127.0.0.1:${(gateway.getHttpServer().address() as AddressInfo).port}`;
  }

  // Each test starts the executors it needs; none outlives it, even a failing one.
  afterEach(stopAll, 60_000);

  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  const terminal = (sessionId: string, command: string, baseUrl?: string, extra: Record<string, unknown> = {}) =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: { command, ...extra } }, baseUrl });
  const sandboxesOf = async (id: string) => (await engineOf.get(id)!.listContainers({ filters: { label: [`runbox.executor=${id}`] } })).length;
  /**
   * The executor holding the session's sandbox: its row names it, and that executor's
   * engine runs the container (an executor that died leaves its container behind, so the
   * labels alone do not say).
   */
  async function holderOf(sessionId: string): Promise<string> {
    const [row] = await queryDatabase<{ executor_id: string }>(stack.db.url, `SELECT executor_id FROM sandboxes WHERE session_id = $1 AND state <> 'removed'`, [sessionId]);
    if (!row) throw new Error(`session ${sessionId} has no sandbox`);
    const found = await engineOf.get(row.executor_id)!.listContainers({ filters: { label: [`runbox.executor=${row.executor_id}`, `runbox.session=${sessionId}`] } });
    if (found.length !== 1) throw new Error(`${row.executor_id}'s engine runs ${found.length} containers of ${sessionId}`);
    return row.executor_id;
  }

  /** Whether the file exists in the container, asked of its engine directly. */
  async function execIn(executorId: string, containerId: string, cmd: string[]): Promise<number | null> {
    const exec = await engineOf.get(executorId)!.getContainer(containerId).exec({ Cmd: cmd });
    await new Promise<void>((resolve, reject) => exec.start({}, (err, stream) => (err ? reject(err) : stream?.on('end', resolve).resume())));
    // The engine may report the exec as running for a moment after its output ended.
    return eventually('the exec to be reported ended', async () => {
      const { Running, ExitCode } = await exec.inspect();
      return Running ? undefined : ExitCode;
    }, 10_000);
  }
  const fileExists = async (executorId: string, containerId: string, path: string) => (await execIn(executorId, containerId, ['test', '-e', path])) === 0;
  /**
   * A command that marks its start and then runs until the test lets it finish (`letFinish`):
   * a fixed sleep could end before a loaded machine got round to the step it must outlast.
   */
  const heldCommand = (output: string) => `touch /workspace/started; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo ${output}`;
  async function letFinish(executorId: string, containerId: string): Promise<void> {
    expect(await execIn(executorId, containerId, ['touch', '/tmp/go'])).toBe(0);
  }

  it('places each new session on the executor with the most free room, and answers 503 with Retry-After once all are full', async () => {
    await Promise.all([startExecutor(ex('place-a'), 0, 1), startExecutor(ex('place-b'), 1, 3), startExecutor(ex('place-c'), 2, 5)]);
    const sessions: string[] = [];
    for (let i = 0; i < 6; i++) {
      const id = await newSession();
      sessions.push(id);
      const res = await terminal(id, 'echo placed');
      expect(res.status).toBe(200);
    }
    // Most free first: c (5) takes two, then b and c alternate; a (1 slot) is never the freest.
    expect([await sandboxesOf(ex('place-a')), await sandboxesOf(ex('place-b')), await sandboxesOf(ex('place-c'))]).toEqual([0, 2, 4]);

    for (let i = 0; i < 3; i++) {
      const id = await newSession();
      sessions.push(id);
      expect((await terminal(id, 'echo placed')).status).toBe(200);
    }
    expect([await sandboxesOf(ex('place-a')), await sandboxesOf(ex('place-b')), await sandboxesOf(ex('place-c'))]).toEqual([1, 3, 5]);

    const full = await terminal(await newSession(), 'echo nowhere');
    expect(full.status).toBe(503);
    expect(full.body.error.code).toBe('executor_unavailable');
    expect(full.body.error.message).toContain('no executor has room');
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Sessions already placed keep working when every executor is full.
    expect((await terminal(sessions[0], 'echo still here')).body.output).toContain('still here');

    for (const id of sessions) expect((await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(204);
  }, 180_000);

  it('never overfills an executor when gateways place at once: a full one refuses and the next is tried', async () => {
    await Promise.all([startExecutor(ex('race-a'), 1, 1), startExecutor(ex('race-b'), 2, 3)]);
    const urls = [undefined, await startGateway({}), await startGateway({}), await startGateway({})];
    const sessions = await Promise.all(urls.map(() => newSession()));
    // Four gateways each see race-b with the most room (3 against 1) and send their session
    // there at the same moment: it takes three and refuses the fourth, which goes to race-a.
    const answers = await Promise.all(sessions.map((id, i) => terminal(id, 'echo raced', urls[i])));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect([await sandboxesOf(ex('race-a')), await sandboxesOf(ex('race-b'))]).toEqual([1, 3]);
    const fifth = await terminal(await newSession(), 'echo no room', urls[1]);
    expect(fifth.status).toBe(503);
    expect(fifth.body.error.code).toBe('executor_unavailable');
    for (const id of sessions) expect((await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey })).status).toBe(204);
  }, 120_000);

  it('answers a killed executor’s sessions with 503 at once, and the same id back has the workspace', async () => {
    const executor = await startExecutor(ex('kill-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'echo kept > /workspace/mark')).status).toBe(200);
    const [container] = await engineOf.get(ex('kill-a'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });
    const slow = terminal(session, 'touch /workspace/started; sleep 60; echo too-late', undefined, { max_wait_ms: 90_000, timeout_seconds: 90 });
    await eventually('the slow call to start', () => fileExists(ex('kill-a'), container.Id, '/workspace/started'));

    await executor.kill('SIGKILL');
    const began = Date.now();
    // The call in flight stops waiting once the executor is counted lost, not at its 60 s limit.
    const cut = await slow;
    expect(Date.now() - began).toBeLessThan(10_000);
    expect(cut.status).toBe(503);
    expect(cut.body.error.details).toEqual({ outcome_unknown: true });
    expect(cut.body.error.message).toContain('went away during the call');
    const gone = await terminal(session, 'cat /workspace/mark');
    expect(Date.now() - began).toBeLessThan(10_000);
    expect(gone.status).toBe(503);
    expect(gone.body.error.code).toBe('executor_unavailable');
    expect(gone.headers.get('retry-after')).not.toBeNull();

    // Once its heartbeats are missed the gateway does not even send the call.
    await eventually('kill-a to be counted lost', async () => (await listed()).some((e) => e.id === ex('kill-a') && e.standing === 'lost'));
    const lost = await terminal(session, 'cat /workspace/mark');
    expect(lost.status).toBe(503);
    expect(lost.body.error.message).toContain('has not been heard from');
    // A run's tool call on it fails the run at once, saying it is temporary: no run waits for it.
    model.enqueue({ toolCalls: [{ id: 'call_1', name: 'terminal', arguments: { command: 'cat /workspace/mark' } }] });
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'read the mark', session_id: session } });
    expect(created.status).toBe(202);
    const run = await stack.waitForRun(tenant.apiKey, created.body.id, undefined, 20_000);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('has not been heard from');
    expect(run.error).toContain('temporary');

    await startExecutor(ex('kill-a'), 1);
    const back = await terminal(session, 'cat /workspace/mark');
    expect(back.status).toBe(200);
    expect(back.body.output).toContain('kept');
  }, 120_000);

  it('never reports a call lost while its executor only stalls past its heartbeats, and a kill during the stall still ends it', async () => {
    const executor = await startExecutor(ex('stall-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'true')).status).toBe(200);
    const [container] = await engineOf.get(ex('stall-a'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });
    let settled = false;
    const call = terminal(session, heldCommand('finished'), undefined, { max_wait_ms: 60_000, timeout_seconds: 60 }).finally(() => (settled = true));
    await eventually('the call to start', () => fileExists(ex('stall-a'), container.Id, '/workspace/started'));

    // A scheduling pause on a loaded machine, made long: no heartbeat for well past three.
    executor.pause();
    await eventually('stall-a to be counted lost', async () => (await listed()).some((e) => e.id === ex('stall-a') && e.standing === 'lost'));
    // The gateway has looked again and still hears nothing: a new call is not even sent.
    const meanwhile = await terminal(session, 'echo not sent');
    expect(meanwhile.status).toBe(503);
    expect(meanwhile.body.error.message).toContain('has not been heard from');
    // Yet the call it took is still awaited: the stalled process still holds its connection.
    expect(settled).toBe(false);
    executor.resume();
    await letFinish(ex('stall-a'), container.Id);
    const done = await call;
    expect(done.status).toBe(200);
    expect(done.body.output).toContain('finished');

    // Stalled again, then killed: the call in flight is ended once the process is gone.
    const second = terminal(session, 'touch /workspace/second; sleep 60', undefined, { max_wait_ms: 90_000, timeout_seconds: 90 });
    await eventually('the second call to start', () => fileExists(ex('stall-a'), container.Id, '/workspace/second'));
    executor.pause();
    await eventually('stall-a to be counted lost', async () => (await listed()).some((e) => e.id === ex('stall-a') && e.standing === 'lost'));
    const killed = Date.now();
    await executor.kill('SIGKILL');
    const cut = await second;
    expect(Date.now() - killed).toBeLessThan(10_000);
    expect(cut.status).toBe(503);
    expect(cut.body.error.details).toEqual({ outcome_unknown: true });
    expect(cut.body.error.message).toContain('went away during the call');
  }, 120_000);

  it('after the grace: `fail` answers 410 executor_lost, `recreate` starts an empty sandbox elsewhere and says so', async () => {
    const doomed = await startExecutor(ex('grace-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'echo lost > /workspace/mark')).status).toBe(200);
    await startExecutor(ex('grace-b'), 2);
    const grace = { RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS: String(SHORT_GRACE_SECONDS) };
    const failing = await startGateway({ ...grace, RUNBOX_ON_EXECUTOR_LOSS: 'fail' });
    const recreatingUrl = await startGateway({ ...grace, RUNBOX_ON_EXECUTOR_LOSS: 'recreate' });

    await doomed.kill('SIGKILL');
    await eventually('grace-a to be gone past its grace', async () => (await listed(failing)).some((e) => e.id === ex('grace-a') && e.standing === 'gone'), 30_000);
    // The main gateway, with its long grace, still waits for it.
    expect((await terminal(session, 'cat /workspace/mark')).status).toBe(503);
    const failed = await terminal(session, 'cat /workspace/mark', failing);
    expect(failed.status).toBe(410);
    expect(failed.body.error.code).toBe('executor_lost');

    const recreated = await terminal(session, 'ls -A /workspace; echo listed', recreatingUrl);
    expect(recreated.status).toBe(200);
    expect(recreated.body.output).toContain('workspace');
    expect(recreated.body.output).toContain('lost');
    expect(recreated.body.output).not.toContain('mark');
    expect(recreated.body.metadata.workspace_lost).toBe(true);
    expect(await holderOf(session)).toBe(ex('grace-b'));
    // From then on it is grace-b's session, for either gateway, with no note.
    const next = await terminal(session, 'echo again');
    expect(next.status).toBe(200);
    expect(next.body.output).not.toContain('note');

    expect((await stack.request('DELETE', `/v1/sessions/${session}`, { key: tenant.apiKey })).status).toBe(204);
  }, 120_000);

  it('drains on SIGTERM: the call in flight completes, new sessions go elsewhere, and it comes back with its sessions', async () => {
    const draining = await startExecutor(ex('drain-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'echo before > /workspace/mark')).status).toBe(200);
    await startExecutor(ex('drain-b'), 2);
    const [container] = await engineOf.get(ex('drain-a'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });

    const inFlight = terminal(session, heldCommand('finished-in-drain'));
    // In flight once the command runs in the sandbox.
    await eventually('the slow call to start', () => fileExists(ex('drain-a'), container.Id, '/workspace/started'));
    const stopping = draining.kill('SIGTERM');
    // Taking no new session from the moment it drains: a new one goes to drain-b.
    await eventually('drain-a to announce it is draining', async () => (await listed()).some((e) => e.id === ex('drain-a') && e.state === 'draining'));
    const fresh = await newSession();
    expect((await terminal(fresh, 'echo elsewhere')).status).toBe(200);
    expect(await holderOf(fresh)).toBe(ex('drain-b'));

    // Still in flight all this time; it finishes while the executor drains.
    await letFinish(ex('drain-a'), container.Id);
    const finished = await inFlight;
    expect(finished.status).toBe(200);
    expect(finished.body.output).toContain('finished-in-drain');
    await stopping;
    const meanwhile = await terminal(session, 'cat /workspace/mark');
    expect(meanwhile.status).toBe(503);
    expect(meanwhile.headers.get('retry-after')).not.toBeNull();

    await startExecutor(ex('drain-a'), 1);
    const back = await terminal(session, 'cat /workspace/mark');
    expect(back.body.output).toContain('before');
    const [same] = await engineOf.get(ex('drain-a'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });
    expect(same.Id).toBe(container.Id);
  }, 120_000);

  it('decommissions an executor: no new session goes there, and its sessions are released per the loss policy', async () => {
    await startExecutor(ex('retire-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'echo old > /workspace/mark')).status).toBe(200);
    await startExecutor(ex('retire-b'), 2);
    const recreatingUrl = await startGateway({ RUNBOX_ON_EXECUTOR_LOSS: 'recreate' });

    expect((await stack.request('POST', `/v1/admin/executors/${ex('retire-a')}/decommission`, { key: tenant.apiKey })).status).toBe(401);
    expect((await stack.request('POST', '/v1/admin/executors/nobody-here/decommission', admin())).status).toBe(404);
    const malformed = await stack.request('POST', '/v1/admin/executors/a.b*/decommission', admin());
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.message).toContain('an executor id');
    const retired = await stack.request('POST', `/v1/admin/executors/${ex('retire-a')}/decommission`, admin());
    expect(retired.status).toBe(200);
    expect(retired.body).toEqual({ executor_id: ex('retire-a'), decommissioned: true, sessions: 1, on_loss: 'fail' });

    const failed = await terminal(session, 'cat /workspace/mark');
    expect(failed.status).toBe(410);
    expect(failed.body.error.code).toBe('executor_lost');
    expect(failed.body.error.message).toContain('decommissioned');
    // The executor heard it too, and says so in its heartbeats.
    await eventually('retire-a to announce its decommission', async () => (await listed()).some((e) => e.id === ex('retire-a') && e.state === 'decommissioned'));
    for (let i = 0; i < 3; i++) {
      const fresh = await newSession();
      expect((await terminal(fresh, 'echo new')).status).toBe(200);
      expect(await holderOf(fresh)).toBe(ex('retire-b'));
    }
    const moved = await terminal(session, 'ls -A /workspace', recreatingUrl);
    expect(moved.status).toBe(200);
    expect(moved.body.output).toContain('decommissioned');
    expect(moved.body.metadata.workspace_lost).toBe(true);
    expect(await holderOf(session)).toBe(ex('retire-b'));
  }, 120_000);

  it('loses no call while every executor is restarted one by one', async () => {
    const ids = [ex('roll-a'), ex('roll-b'), ex('roll-c')];
    await Promise.all(ids.map((id, i) => startExecutor(id, i as 0 | 1 | 2, 2)));
    const sessions = [await newSession(), await newSession(), await newSession()];
    for (const id of sessions) {
      const placed = await terminal(id, 'true');
      expect({ status: placed.status, error: placed.body.error }).toEqual({ status: 200, error: undefined });
    }
    expect(new Set(await Promise.all(sessions.map(holderOf))).size).toBe(3);

    // Each session appends numbered lines; a 503 (nothing ran) is tried again, anything else is a lost call.
    let rolling = true;
    const unexpected: string[] = [];
    let retried = 0;
    const writer = async (session: string): Promise<number> => {
      let n = 0;
      while (rolling || n < 5) {
        const res = await terminal(session, `echo ${n} >> /workspace/log`);
        if (res.status === 200) n++;
        else if (res.status === 503 && res.headers.get('retry-after') && !res.body.error.details?.outcome_unknown) {
          retried++;
          await new Promise((r) => setTimeout(r, 100));
        } else unexpected.push(`${res.status} ${res.text}`);
      }
      return n;
    };
    const writers = sessions.map(writer);
    for (const id of ids) {
      await executors.get(id)!.kill('SIGTERM');
      await startExecutor(id, ids.indexOf(id) as 0 | 1 | 2, 2);
    }
    rolling = false;
    const counts = await Promise.all(writers);
    expect(unexpected).toEqual([]);
    process.stdout.write(`[placement] rolling restart of 3 executors: ${counts.reduce((a, b) => a + b, 0)} calls ran, ${retried} answered 503 and were tried again\n`);
    for (const [i, session] of sessions.entries()) {
      const log = await terminal(session, 'cat /workspace/log');
      expect(log.body.output.split('stdout:\n')[1]?.trim().split('\n') ?? log.body.output).toEqual(Array.from({ length: counts[i] }, (_, n) => String(n)));
    }
  }, 240_000);
  /** What the model was last told: the newest tool result in its request. */
  const lastToolResult = (request: RecordedRequest): string => request.body.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';
  const slowCall = { command: 'touch /workspace/started; sleep 60; echo too-late', max_wait_ms: 90_000, timeout_seconds: 90 };

  it('ends a run whose executor goes away during its tool call under `fail`, saying the call may or may not have run', async () => {
    const doomed = await startExecutor(ex('runloss-fail'), 1);
    const session = await newSession();
    expect((await terminal(session, 'true')).status).toBe(200);
    const [container] = await engineOf.get(ex('runloss-fail'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });
    model.enqueue({ toolCalls: [{ id: 'call_1', name: 'terminal', arguments: slowCall }] });
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'run the slow thing', session_id: session } });
    expect(created.status).toBe(202);
    await eventually('the run\'s call to start', () => fileExists(ex('runloss-fail'), container.Id, '/workspace/started'));

    await doomed.kill('SIGKILL');
    const run = await stack.waitForRun(tenant.apiKey, created.body.id, undefined, 30_000);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('went away during the call');
    expect(run.error).toContain('check its effects');
  }, 120_000);

  it('carries a run whose executor goes away during its tool call under `recreate` on to a new sandbox elsewhere, telling the model', async () => {
    const doomed = await startExecutor(ex('runloss-a'), 1);
    const session = await newSession();
    expect((await terminal(session, 'echo old > /workspace/mark')).status).toBe(200);
    await startExecutor(ex('runloss-b'), 2);
    const recreating = await startGateway({ RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS: String(SHORT_GRACE_SECONDS), RUNBOX_ON_EXECUTOR_LOSS: 'recreate' });
    // From here on only that gateway takes runs (the stack's gateway stops pulling, as at its shutdown).
    await stack.gatewayApp.get(RunWorkers).beforeApplicationShutdown();
    const [container] = await engineOf.get(ex('runloss-a'))!.listContainers({ filters: { label: [`runbox.session=${session}`] } });
    const told: string[] = [];
    model.enqueue(
      { toolCalls: [{ id: 'call_1', name: 'terminal', arguments: slowCall }] },
      (request) => {
        told.push(lastToolResult(request));
        return { toolCalls: [{ id: 'call_2', name: 'terminal', arguments: { command: 'ls -A /workspace; echo listed' } }] };
      },
      (request) => {
        told.push(lastToolResult(request));
        return { content: 'carried on' };
      },
    );
    const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { input: 'keep working', session_id: session }, baseUrl: recreating });
    expect(created.status).toBe(202);
    await eventually('the run\'s call to start', () => fileExists(ex('runloss-a'), container.Id, '/workspace/started'));

    await doomed.kill('SIGKILL');
    const run = await stack.waitForRun(tenant.apiKey, created.body.id, undefined, 60_000);
    expect(run.status).toBe('completed');
    expect(told).toHaveLength(2);
    // The call in flight: its outcome and the whole workspace are lost, and the model hears both.
    expect(told[0]).toContain('went away during the call');
    expect(told[0]).toContain('workspace was lost');
    // The next call ran in a new, empty sandbox on the other executor, with the note.
    expect(told[1]).toContain('listed');
    expect(told[1]).toContain('workspace');
    expect(told[1]).toContain('lost');
    expect(told[1]).not.toContain('mark');
    expect(await holderOf(session)).toBe(ex('runloss-b'));
  }, 180_000);
});
