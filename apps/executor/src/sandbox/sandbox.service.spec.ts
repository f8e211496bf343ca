import type { Logger } from 'pino';
import { PassThrough } from 'node:stream';
import { AgentChannel, ChannelTimeoutError, ProtocolViolationError } from './agent-channel';
import { SandboxRecord, SandboxRepository, SandboxState } from './sandbox.repository';
import { ProvisionedSandbox, SandboxRef, SandboxRuntime, WantedResources } from './sandbox-runtime';
import { BackendMismatchError, CallCancelledError, NewSessionRefusedError, SandboxService, SandboxStartingError, SandboxUnavailableError, SessionNotFoundError } from './sandbox.service';

/** Holds an agent's answers: `arrived` settles when a call reaches the agent, which answers once `release()` is called. */
class CallGate {
  private arrive!: () => void;
  readonly arrived = new Promise<void>((resolve) => (this.arrive = resolve));
  release!: () => void;
  readonly released = new Promise<void>((resolve) => (this.release = resolve));

  onArrive(): void {
    this.arrive();
  }
}

/**
 * A channel whose agent answers every call with its op name, after `delayMs` (and after
 * `gate`, if given); `misbehave` is answered with a reply to a request nobody made.
 */
function echoChannel(delayMs = 0, gate?: CallGate): AgentChannel {
  const toAgent = new PassThrough();
  const fromAgent = new PassThrough();
  toAgent.setEncoding('utf8');
  toAgent.on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter(Boolean)) {
      const { id, op } = JSON.parse(line);
      if (op === 'misbehave') {
        fromAgent.write(JSON.stringify({ id: 'never-asked', result: { output: 'forged', metadata: {}, is_error: false } }) + '\n');
        continue;
      }
      gate?.onArrive();
      const answer = () => fromAgent.write(JSON.stringify({ id, result: { output: op, metadata: {}, is_error: false } }) + '\n');
      void (gate?.released ?? Promise.resolve()).then(() => setTimeout(answer, delayMs));
    }
  });
  return new AgentChannel(toAgent, fromAgent, undefined, false);
}

class FakeRuntime implements SandboxRuntime {
  readonly backend = 'docker' as const;
  provisioned = 0;
  destroyed: Array<{ ref: SandboxRef; keep: boolean }> = [];
  alive = new Set<string>();
  warm: ProvisionedSandbox[] = [];
  callDelayMs = 0;
  /** While set, channels connected from now on hold their answers behind it. */
  callGate?: CallGate;
  /** Every channel connect() opened, in order. */
  connected: AgentChannel[] = [];
  /** While set, provision() waits for it: the container is still starting. */
  provisionGate?: Promise<void>;
  /** While set, connect() waits for it: the container's agent is still starting. */
  connectGate?: Promise<void>;
  connects = 0;
  /** This many connect()s from now on time out, as an agent that has not come up does. */
  attachTimeouts = 0;
  start(): void {}
  takeWarm(): ProvisionedSandbox | undefined {
    return this.warm.shift();
  }
  returnWarm(_sandbox: ProvisionedSandbox): void {}
  async provision(_t: string, sessionId: string, workspace: string | null): Promise<ProvisionedSandbox> {
    this.provisioned++;
    await new Promise((r) => setTimeout(r, 5));
    await this.provisionGate;
    const containerId = `c-${sessionId}-${this.provisioned}`;
    this.alive.add(containerId);
    return { containerId, volume: workspace ?? `v-${sessionId}` };
  }
  async isAlive(ref: SandboxRef): Promise<boolean> {
    return ref.containerId !== null && this.alive.has(ref.containerId);
  }
  async connect(): Promise<AgentChannel> {
    this.connects++;
    await this.connectGate;
    if (this.attachTimeouts > 0) {
      this.attachTimeouts--;
      throw new ChannelTimeoutError('attach', 15_000);
    }
    const channel = echoChannel(this.callDelayMs, this.callGate);
    this.connected.push(channel);
    return channel;
  }
  async destroy(ref: SandboxRef, keep: boolean): Promise<void> {
    if (ref.containerId) this.alive.delete(ref.containerId);
    this.destroyed.push({ ref, keep });
  }
  async sweep(_wanted: () => Promise<WantedResources>): Promise<number> {
    return 0;
  }
  async close(): Promise<void> {}
}

class FakeRepository {
  rows = new Map<string, SandboxRecord>();
  liveSessions = new Map<string, string>(); // session → tenant
  async findForCall(tenantId: string, sessionId: string) {
    const live = this.liveSessions.get(sessionId) === tenantId;
    return { live, record: live ? (this.rows.get(sessionId) ?? null) : null };
  }
  async bindIfNew(record: SandboxRecord) {
    const { live, record: existing } = await this.findForCall(record.tenantId, record.sessionId);
    if (!live || (existing && existing.state !== 'removed')) return { live, bound: false, record: existing };
    this.rows.set(record.sessionId, { ...record });
    return { live, bound: true, record: null };
  }
  async find(_tenantId: string, sessionId: string) {
    return this.rows.get(sessionId) ?? null;
  }
  async save(record: SandboxRecord) {
    this.rows.set(record.sessionId, { ...record });
  }
  /** The real one also enforces max_sandboxes; no limits here. */
  async claim(record: SandboxRecord) {
    return this.save({ ...record, state: 'creating' });
  }
  async markGone(_tenantId: string, sessionId: string, state: SandboxState, volume: string | null) {
    const row = this.rows.get(sessionId);
    if (row) this.rows.set(sessionId, { ...row, state, containerId: null, volume });
  }
  async liveRowsOf(executorId: string) {
    return [...this.rows.values()].filter((r) => r.executorId === executorId && r.state !== 'removed' && this.liveSessions.has(r.sessionId));
  }
  async markRemovedWhereSessionGone() {
    return 0;
  }
}

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

function setup(idleTtlMs = 60_000, capacity?: number) {
  let clock = 1_000;
  const runtime = new FakeRuntime();
  const repo = new FakeRepository();
  const service = new SandboxService(
    'exec-1',
    new Map([['docker', runtime]]),
    repo as unknown as SandboxRepository,
    { idleTtlMs, keepWorkspaceOnIdle: true },
    silent,
    () => clock,
    capacity,
  );
  const advance = (ms: number) => (clock += ms);
  return { runtime, repo, service, advance };
}

const target = { tenantId: 'ten_a', sessionId: 'ses_1', backend: 'docker' as const };

/** Polls a condition that an async step makes true; bounded, no fixed sleep. */
async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('SandboxService', () => {
  it('refuses new sessions beyond its capacity, even when their first calls race for the last slot', async () => {
    const { runtime, repo, service } = setup(60_000, 2);
    for (const id of ['ses_1', 'ses_2', 'ses_3', 'ses_4']) repo.liveSessions.set(id, 'ten_a');
    let release!: () => void;
    runtime.provisionGate = new Promise((resolve) => (release = resolve));
    // Three first calls at once while the containers start: two are admitted, one refused.
    const calls = ['ses_1', 'ses_2', 'ses_3'].map((sessionId) => service.call({ ...target, sessionId }, 'ping', {}, 1000));
    const refused = await Promise.race(calls.map((c, i) => c.then(() => -1, () => i)));
    expect(refused).toBe(2);
    await expect(calls[2]).rejects.toMatchObject({ reason: 'executor_full' });
    expect(service.occupied).toBe(2);
    release();
    await Promise.all(calls.slice(0, 2));
    expect(runtime.provisioned).toBe(2);
    await expect(service.call({ ...target, sessionId: 'ses_4' }, 'ping', {}, 1000)).rejects.toBeInstanceOf(NewSessionRefusedError);
    // The sessions it holds are served as before.
    await expect(service.call(target, 'ping', {}, 1000)).resolves.toMatchObject({ output: 'ping' });
  });

  it('takes no new session once draining, and still serves the ones it holds and those whose workspace it kept', async () => {
    const { repo, service } = setup();
    for (const id of ['ses_1', 'ses_2', 'ses_3']) repo.liveSessions.set(id, 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    repo.rows.set('ses_3', { sessionId: 'ses_3', tenantId: 'ten_a', executorId: 'exec-1', backend: 'docker', containerId: null, volume: 'v-kept', state: 'stopped' });
    service.stopAdmitting('draining');
    expect(service.admission).toBe('draining');
    await expect(service.call({ ...target, sessionId: 'ses_2' }, 'ping', {}, 1000)).rejects.toMatchObject({ reason: 'executor_draining' });
    await expect(service.call(target, 'ping', {}, 1000)).resolves.toMatchObject({ output: 'ping' });
    await expect(service.call({ ...target, sessionId: 'ses_3' }, 'ping', {}, 1000)).resolves.toMatchObject({ output: 'ping' });
    service.stopAdmitting('decommissioned');
    service.stopAdmitting('draining');
    expect(service.admission).toBe('decommissioned');
  });

  it('stops a sandbox that breaks the channel protocol, and starts the next call on a new one with the same workspace', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    await expect(service.call(target, 'misbehave', {}, 1000)).rejects.toBeInstanceOf(ProtocolViolationError);
    await until('the sandbox stopped', () => runtime.destroyed.length === 1);
    expect(runtime.destroyed[0]).toEqual({ ref: { containerId: 'c-ses_1-1', volume: 'v-ses_1' }, keep: true });
    await until('the row marked failed', () => repo.rows.get('ses_1')?.state === 'failed');
    expect(repo.rows.get('ses_1')).toMatchObject({ volume: 'v-ses_1' });
    await expect(service.call(target, 'ping', {}, 1000)).resolves.toMatchObject({ output: 'ping' });
    expect(runtime.provisioned).toBe(2);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'c-ses_1-2', volume: 'v-ses_1' });
  });

  it('makes one sandbox for concurrent first calls of a session', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    const results = await Promise.all([1, 2, 3].map(() => service.call(target, 'ping', {}, 1000)));
    expect(results.map((r) => r.output)).toEqual(['ping', 'ping', 'ping']);
    expect(runtime.provisioned).toBe(1);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'c-ses_1-1', executorId: 'exec-1' });
  });

  it('answers "not ready, nothing ran" when the sandbox takes longer to start than the call may wait, and the start goes on for the next call', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    let started!: () => void;
    runtime.provisionGate = new Promise<void>((resolve) => (started = resolve));
    const connectedBefore = runtime.connected.length;
    await expect(service.call(target, 'terminal', {}, 1000, { callId: 'run_1:call_a', startWithinMs: 20 })).rejects.toBeInstanceOf(SandboxStartingError);
    // Nothing reached an agent: the call may be sent again.
    expect(runtime.connected.length).toBe(connectedBefore);
    started();
    await until('the sandbox to be ready', () => repo.rows.get('ses_1')?.state === 'ready');
    await expect(service.call(target, 'terminal', {}, 1000, { callId: 'run_1:call_a', startWithinMs: 20 })).resolves.toMatchObject({ output: 'terminal' });
    // The first start was not given up and begun again.
    expect(runtime.provisioned).toBe(1);
  });

  it('counts the agent\'s start as the sandbox\'s: a channel not attached in time is "not ready, nothing ran", and the attach goes on', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    let agentUp!: () => void;
    runtime.connectGate = new Promise<void>((resolve) => (agentUp = resolve));
    await expect(service.call(target, 'terminal', {}, 1000, { startWithinMs: 20 })).rejects.toBeInstanceOf(SandboxStartingError);
    expect(runtime.connected).toHaveLength(0);
    agentUp();
    await expect(service.call(target, 'terminal', {}, 1000, { startWithinMs: 20 })).resolves.toMatchObject({ output: 'terminal' });
    expect(runtime.connects).toBe(1);
    expect(runtime.provisioned).toBe(1);
  });

  it('takes a new container whose agent did not answer its first attach in time as still starting, when the call waits for a start', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    runtime.attachTimeouts = 1;
    await expect(service.call(target, 'terminal', {}, 1000, { startWithinMs: 1000 })).rejects.toBeInstanceOf(SandboxStartingError);
    // The next try attaches afresh, to the same container.
    await expect(service.call(target, 'terminal', {}, 1000, { startWithinMs: 1000 })).resolves.toMatchObject({ output: 'terminal' });
    expect(runtime.provisioned).toBe(1);
    expect(runtime.connects).toBe(2);
  });

  it('fails the attach of a call that gives no start wait, and of an agent that answered before, as it always did', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    runtime.attachTimeouts = 1;
    await expect(service.call(target, 'terminal', {}, 1000)).rejects.toThrow(/could not reach the sandbox agent/);
    await service.call(target, 'terminal', {}, 1000);
    // Its agent has answered once: a later attach that times out is a failure, not a start.
    runtime.connected[runtime.connected.length - 1].close('the exec of the attach relay ended');
    runtime.attachTimeouts = 1;
    const failed = service.call(target, 'terminal', {}, 1000, { startWithinMs: 1000 });
    await expect(failed).rejects.toBeInstanceOf(SandboxUnavailableError);
    await expect(failed).rejects.not.toBeInstanceOf(SandboxStartingError);
  });

  it('bounds only the start: the call itself has its own limit', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    runtime.callDelayMs = 30;
    await service.call(target, 'ping', {}, 1000);
    await expect(service.call(target, 'terminal', {}, 1000, { startWithinMs: 1 })).resolves.toMatchObject({ output: 'terminal' });
  });

  it('records the sandbox as creating while its container starts, and ready once it is up', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    let started!: () => void;
    runtime.provisionGate = new Promise<void>((resolve) => (started = resolve));
    const call = service.call(target, 'ping', {}, 1000);
    await until('the creating row', () => repo.rows.get('ses_1')?.state === 'creating');
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'creating', containerId: null, executorId: 'exec-1' });
    started();
    await expect(call).resolves.toMatchObject({ output: 'ping' });
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'c-ses_1-1' });
  });

  it('leaves a database outage as it is when a new sandbox cannot be recorded, so the call is answered "try again"; the container it started goes', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    const outage = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    repo.claim = () => Promise.reject(outage);
    await expect(service.call(target, 'ping', {}, 1000)).rejects.toBe(outage);
    expect(runtime.destroyed.map((d) => d.ref.containerId)).toEqual(['c-ses_1-1']);
    expect(service.size).toBe(0);
  });

  it('keeps one channel into a sandbox across calls, sequential and concurrent', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    for (let i = 0; i < 3; i++) await service.call(target, 'ping', {}, 1000);
    await Promise.all([1, 2, 3].map(() => service.call(target, 'ping', {}, 1000)));
    expect(runtime.connected).toHaveLength(1);
    expect(runtime.connected[0].isOpen).toBe(true);
  });

  it('attaches again when the channel broke while the container lives on', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    runtime.connected[0].close('the exec of the attach relay ended');
    await expect(service.call(target, 'terminal', {}, 1000)).resolves.toMatchObject({ output: 'terminal' });
    expect(runtime.connected).toHaveLength(2);
    // The same container, re-attached: nothing was made or removed.
    expect(runtime.provisioned).toBe(1);
    expect(runtime.destroyed).toEqual([]);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'c-ses_1-1' });
  });

  it('refuses a call whose cancel came while its sandbox was being made, and only that call', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    const call = service.call(target, 'terminal', {}, 1000, { callId: 'run_1:call_a' });
    // No sandbox yet: there is no channel to tell, but the cancel is kept for the call.
    expect(await service.cancel('ten_a', 'ses_1', 'run_1:call_a')).toBe(false);
    await expect(call).rejects.toBeInstanceOf(CallCancelledError);
    expect(runtime.provisioned).toBe(1);
    // Used up, and scoped by tenant: the same id runs later, another tenant's cancel stops nothing.
    await expect(service.call(target, 'terminal', {}, 1000, { callId: 'run_1:call_a' })).resolves.toMatchObject({ output: 'terminal' });
    await service.cancel('ten_b', 'ses_1', 'run_1:call_b');
    await expect(service.call(target, 'terminal', {}, 1000, { callId: 'run_1:call_b' })).resolves.toMatchObject({ output: 'terminal' });
  });

  it('sends a cancel to the sandbox that holds the call, and forgets old cancels', async () => {
    const { repo, service, advance } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    expect(await service.cancel('ten_a', 'ses_1', 'run_1:gone')).toBe(true);
    advance(11 * 60_000);
    await service.cancel('ten_a', 'ses_1', 'run_1:other');
    // Ten minutes on, the first cancel no longer stops a call that reuses its id.
    await expect(service.call(target, 'terminal', {}, 1000, { callId: 'run_1:gone' })).resolves.toMatchObject({ output: 'terminal' });
  });

  it("answers another tenant's session like a missing one, and never creates for it", async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await expect(service.call({ ...target, tenantId: 'ten_b' }, 'ping', {}, 1000)).rejects.toBeInstanceOf(SessionNotFoundError);
    await service.call(target, 'ping', {}, 1000);
    await expect(service.call({ ...target, tenantId: 'ten_b' }, 'ping', {}, 1000)).rejects.toBeInstanceOf(SessionNotFoundError);
    expect(runtime.provisioned).toBe(1);
  });

  it('binds a warm sandbox to a new session in one step, and gives it back to a session that has one', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    repo.liveSessions.set('ses_2', 'ten_a');
    runtime.alive.add('warm-1');
    runtime.warm.push({ containerId: 'warm-1', volume: 'warm-1-ws', channel: echoChannel() });
    const saves: string[] = [];
    const save = repo.save.bind(repo);
    repo.save = async (r) => {
      saves.push(r.state);
      return save(r);
    };
    await service.call(target, 'ping', {}, 1000);
    expect(runtime.provisioned).toBe(0);
    expect(saves).toEqual([]);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'warm-1', volume: 'warm-1-ws' });

    // A session whose workspace was kept gets its own container on it; the warm one goes back.
    repo.rows.set('ses_2', { ...repo.rows.get('ses_1')!, sessionId: 'ses_2', state: 'stopped', containerId: null, volume: 'kept-ws' });
    const spare = { containerId: 'warm-2', volume: 'warm-2-ws', channel: echoChannel() };
    runtime.warm.push(spare);
    runtime.returnWarm = (s) => void runtime.warm.unshift(s);
    await service.call({ ...target, sessionId: 'ses_2' }, 'ping', {}, 1000);
    expect(repo.rows.get('ses_2')).toMatchObject({ state: 'ready', containerId: 'c-ses_2-1', volume: 'kept-ws' });
    expect(runtime.warm).toEqual([spare]);
  });

  it('reaps an idle sandbox, keeping its workspace, and never one with a call in flight', async () => {
    const { runtime, repo, service, advance } = setup(1_000);
    repo.liveSessions.set('ses_1', 'ten_a');
    repo.liveSessions.set('ses_2', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    const gate = (runtime.callGate = new CallGate());
    const busy = service.call({ ...target, sessionId: 'ses_2' }, 'ping', {}, 1000);
    await gate.arrived; // ses_2's call is at its agent now, unanswered
    advance(5_000);
    expect(await service.reapIdle()).toBe(1);
    gate.release();
    await busy;
    expect(runtime.destroyed).toEqual([{ ref: { containerId: 'c-ses_1-1', volume: 'v-ses_1' }, keep: true }]);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'stopped', containerId: null, volume: 'v-ses_1' });

    // The next call makes a new sandbox on the kept workspace.
    await service.call(target, 'ping', {}, 1000);
    expect(repo.rows.get('ses_1')).toMatchObject({ state: 'ready', containerId: 'c-ses_1-3', volume: 'v-ses_1' });
  });

  it('refuses a call for another backend than the one the session already has', async () => {
    const { repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    await expect(service.call({ ...target, backend: 'local' }, 'ping', {}, 1000)).rejects.toBeInstanceOf(BackendMismatchError);
  });

  it('re-adopts a running sandbox recorded before a restart, and marks a dead one stopped', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    repo.liveSessions.set('ses_2', 'ten_a');
    const base = { tenantId: 'ten_a', executorId: 'exec-1', backend: 'docker' as const, state: 'ready' as const };
    repo.rows.set('ses_1', { ...base, sessionId: 'ses_1', containerId: 'old-1', volume: 'vol-1' });
    repo.rows.set('ses_2', { ...base, sessionId: 'ses_2', containerId: 'old-2', volume: 'vol-2' });
    runtime.alive.add('old-1');
    expect(await service.recover()).toBe(1);
    expect(repo.rows.get('ses_2')).toMatchObject({ state: 'stopped', volume: 'vol-2' });
    await service.call(target, 'ping', {}, 1000);
    expect(runtime.provisioned).toBe(0);
    expect(repo.rows.get('ses_1')?.containerId).toBe('old-1');
  });

  it('release removes the sandbox with its workspace and records it removed', async () => {
    const { runtime, repo, service } = setup();
    repo.liveSessions.set('ses_1', 'ten_a');
    await service.call(target, 'ping', {}, 1000);
    expect(await service.release('ten_a', 'ses_1')).toBe(true);
    expect(runtime.destroyed).toEqual([{ ref: { containerId: 'c-ses_1-1', volume: 'v-ses_1' }, keep: false }]);
    expect(repo.rows.get('ses_1')?.state).toBe('removed');
    expect(service.existingChannel('ten_a', 'ses_1')).toBeUndefined();
  });
});
