import { countExecutorResources, ScriptedModelServer } from '@app/testing';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RecordedRequest, ScriptedReply } from '@app/testing';
import { ClusterStack } from './support/cluster-stack';
import { eventually } from './support/runs';
import { SseEvent } from './support/sse';

/** Short leases and sweeps, so takeovers happen within the suite's time. */
const LEASE_SECONDS = 4;
const SWEEP_SECONDS = 2;
/** Each run makes this many terminal calls, one per turn, each taking a moment in the sandbox. */
const CALLS_PER_RUN = 3;
const CALL_SECONDS = 2;
/** What the issue allows between a fault's recovery and every run being over (or going on). */
const RECOVERY_BOUND_MS = 30_000;
const TERMINAL = ['completed', 'failed', 'cancelled'];
const TERMINAL_EVENTS = new Set(TERMINAL.map((s) => `run.${s}`));

interface StartedRun {
  id: string;
  session_id: string;
  input: string;
  /** Every event an SSE client saw, following the run across gateways with Last-Event-ID. */
  followed: Promise<SseEvent[]>;
}

/**
 * Faults injected into a scaled-out Runbox while runs have tool calls in flight: a gateway,
 * the executor and one NATS node are killed with SIGKILL, and PostgreSQL is restarted.
 * After each: every run ends within 30 s of the recovery, no tool call ran twice (each call
 * appends its own line to a file in the sandbox), every stored event reached the SSE
 * clients (who reconnect to another gateway when theirs goes away) with nothing missing or
 * doubled, and no service process exited. At the end, deleting the sessions and one sweep
 * leave no container or volume. Recovery times are printed and written to
 * .runbox/test-results/chaos.json.
 */
describe('chaos: faults while runs have tool calls in flight', () => {
  const stack = new ClusterStack({
    env: {
      RUNBOX_RUN_LEASE_SECONDS: String(LEASE_SECONDS),
      RUNBOX_RUN_SWEEP_SECONDS: '1',
      RUNBOX_SANDBOX_SWEEP_SECONDS: String(SWEEP_SECONDS),
      RUNBOX_EXECUTOR_GRACE_MS: '3000',
      // No warm pool: its idle containers carry the executor's label too, and the last test
      // counts what the sessions leave behind.
      RUNBOX_WARM_POOL_SIZE: '0',
    },
  });
  const figures: Record<string, unknown> = {};
  const allRuns: StartedRun[] = [];
  let key = '';
  let round = 0;

  beforeAll(async () => {
    await stack.start();
    key = await stack.createTenant();
  });

  afterAll(async () => {
    const dir = join(__dirname, '..', '.runbox', 'test-results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'chaos.json'), `${JSON.stringify(figures, null, 2)}\n`);
    console.log(`chaos suite recovery figures (lease ${LEASE_SECONDS} s):\n${JSON.stringify(figures, null, 2)}`);
    await stack.stop();
  });

  const live = () => stack.gateways.filter((g) => g.running);

  async function api(method: string, path: string, body?: unknown, gateway = live()[0]) {
    const res = await fetch(`${gateway.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  }

  /** The model: each run calls terminal CALLS_PER_RUN times, one call per turn, then answers. */
  function script(request: RecordedRequest): ScriptedReply {
    const input = ScriptedModelServer.firstUserMessage(request);
    const done = request.body.messages.filter((m) => m.role === 'tool').length;
    if (done >= CALLS_PER_RUN) return { content: `finished ${input}` };
    const command = `echo ${input}-${done} >> effects.txt; sleep ${CALL_SECONDS}`;
    return { toolCalls: [{ id: `call_${done}`, name: 'terminal', arguments: { command, timeout_seconds: 10 } }] };
  }

  /**
   * A new session whose sandbox is ready. The runs' tool calls have 10 s (and the grace)
   * each, and a cold sandbox is part of its session's first call: with the other suites'
   * containers starting on the same two cores, one took 7.7 s to be ready and its call 21 s,
   * so runs failed before any fault. The faults are what these tests are about, so the
   * sandboxes are made first, with all the time they need.
   */
  async function readySession(gateway: (typeof stack.gateways)[number]): Promise<string> {
    const created = await api('POST', '/v1/sessions', {}, gateway);
    if (created.status !== 201) throw new Error(`POST /v1/sessions answered ${created.status}: ${JSON.stringify(created.body)}`);
    const warmed = await api('POST', `/v1/sessions/${created.body.id}/tools/terminal`, { arguments: { command: 'true', timeout_seconds: 120 } }, gateway);
    if (warmed.status !== 200 || warmed.body.is_error) throw new Error(`the session's first command failed: ${warmed.status} ${JSON.stringify(warmed.body)}`);
    return created.body.id;
  }

  /** Starts `count` runs in new sessions with ready sandboxes, spread over the gateways, each followed by an SSE client. */
  async function startRuns(count: number): Promise<StartedRun[]> {
    round++;
    const gateways = Array.from({ length: count }, (_, i) => live()[i % live().length]);
    const sessions = await Promise.all(gateways.map((gateway) => readySession(gateway)));
    const started: StartedRun[] = [];
    for (let i = 0; i < count; i++) {
      const input = `r${round}x${i}`;
      // Stateless steps: a model call made again after a crash gets the same answer.
      stack.model.route(ScriptedModelServer.sentBy(input), ...Array.from({ length: 20 }, () => script));
      const gateway = gateways[i];
      const res = await api('POST', '/v1/runs', { input, session_id: sessions[i] }, gateway);
      if (res.status !== 202) throw new Error(`POST /v1/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
      started.push({ id: res.body.id, session_id: res.body.session_id, input, followed: follow(res.body.id, i) });
    }
    allRuns.push(...started);
    return started;
  }

  /**
   * An SSE client: reads the run's events from one gateway and, whenever the stream breaks
   * before the terminal event, reconnects to the next live gateway with Last-Event-ID.
   */
  async function follow(runId: string, start: number): Promise<SseEvent[]> {
    const events: SseEvent[] = [];
    const deadline = Date.now() + 180_000;
    for (let attempt = start; Date.now() < deadline; attempt++) {
      const gateways = live();
      const gateway = gateways[attempt % gateways.length];
      const headers: Record<string, string> = { authorization: `Bearer ${key}` };
      if (events.length > 0) headers['last-event-id'] = String(events[events.length - 1].id);
      try {
        const res = await fetch(`${gateway.url}/v1/runs/${runId}/events`, { headers });
        if (res.status === 200 && res.body) {
          for await (const event of sseEvents(res.body as unknown as AsyncIterable<Uint8Array>)) {
            events.push(event);
            if (TERMINAL_EVENTS.has(event.event)) return events;
          }
        } else {
          await res.text();
        }
      } catch {
        // The gateway went away mid-stream: the next one is asked for what came after.
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`the SSE client of ${runId} never saw the run end; it saw ${events.map((e) => e.id).join(',')}`);
  }

  /** The runs' stored events and the services' recent output, when a check is about to fail. */
  async function printForDiagnosis(runs: StartedRun[]): Promise<void> {
    for (const run of runs) {
      const events = await stack.postgres.query<{ seq: number; type: string }>('SELECT seq, type FROM run_events WHERE run_id = $1 ORDER BY seq', [run.id]);
      const [row] = await stack.postgres.query<{ status: string; error: string | null }>('SELECT status, error FROM runs WHERE id = $1', [run.id]);
      console.log(`${run.id} (${row?.status}${row?.error ? `: ${row.error}` : ''}): ${events.map((e) => `${e.seq}:${e.type}`).join(' ')}`);
    }
    console.log(stack.output);
  }

  /** Returns once some run in `runs` has a tool call running in its sandbox; that run. */
  async function toolCallInFlight(runs: StartedRun[]): Promise<StartedRun> {
    return eventually('a tool call in flight', async () => {
      const rows = await stack.postgres.query<{ run_id: string }>(`SELECT run_id FROM tool_calls WHERE status = 'running' AND run_id = ANY($1)`, [runs.map((r) => r.id)]);
      return runs.find((r) => rows.some((row) => row.run_id === r.id));
    });
  }

  /** Waits (within the issue's bound from `recoveredAt`) until every run has ended; returns the ms from recovery to the last end. */
  async function allEnded(runs: StartedRun[], recoveredAt: number): Promise<{ lastEndMs: number; statuses: string[] }> {
    const statuses = await eventually(
      'every run to end within 30 s of the recovery',
      async () => {
        const rows = await stack.postgres.query<{ id: string; status: string }>('SELECT id, status FROM runs WHERE id = ANY($1)', [runs.map((r) => r.id)]).catch(() => []);
        return rows.length === runs.length && rows.every((r) => TERMINAL.includes(r.status)) ? rows.map((r) => r.status) : undefined;
      },
      recoveredAt + RECOVERY_BOUND_MS - Date.now(),
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${stack.output}`);
    });
    return { lastEndMs: Date.now() - recoveredAt, statuses };
  }

  /** No call ran twice, every stored event reached the SSE client once and in order, and no service exited. */
  async function checkInvariants(runs: StartedRun[]): Promise<{ callsRunTwice: number; eventsMissing: number }> {
    let callsRunTwice = 0;
    let eventsMissing = 0;
    for (const run of runs) {
      const file = await api('POST', `/v1/sessions/${run.session_id}/tools/terminal`, { arguments: { command: 'cat effects.txt 2>/dev/null || true' } });
      expect(file.status).toBe(200);
      const lines = (file.body.output as string).split('\n').filter((l) => l.startsWith(`${run.input}-`));
      callsRunTwice += lines.length - new Set(lines).size;
      // Every call stored as completed left its line; none left two.
      const completed = await stack.postgres.query<{ call_id: string }>(`SELECT call_id FROM tool_calls WHERE run_id = $1 AND status = 'completed'`, [run.id]);
      for (const { call_id } of completed) expect(lines).toContain(`${run.input}-${call_id.replace('call_', '')}`);

      const stored = (await stack.postgres.query<{ seq: number; type: string }>('SELECT seq, type FROM run_events WHERE run_id = $1 ORDER BY seq', [run.id])).map((e) => `${e.seq}:${e.type}`);
      expect(stored.map((s) => Number(s.split(':')[0]))).toEqual(stored.map((_, i) => i + 1));
      const seen = (await run.followed).map((e) => `${e.id}:${e.event}`);
      eventsMissing += stored.filter((s) => !seen.includes(s)).length;
      expect(seen).toEqual(stored);
    }
    expect(callsRunTwice).toBe(0);
    expect(eventsMissing).toBe(0);
    expect(stack.exited).toEqual([]);
    return { callsRunTwice, eventsMissing };
  }

  it('kill -9 of the gateway running a run: another gateway takes it over once the lease lapses; SSE clients move to another gateway and lose nothing', async () => {
    const runs = await startRuns(3);
    const target = await toolCallInFlight(runs);
    const victim = await eventually('the gateway holding the run', () => stack.gatewayRunning(target.id));
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    const takeover = await eventually(
      'another gateway to take the run over',
      async () => {
        const [row] = await stack.postgres.query<{ n: number }>(`SELECT count(*)::int AS n FROM run_events WHERE run_id = $1 AND type = 'run.resumed'`, [target.id]);
        return row.n > 0 ? Date.now() - killedAt : undefined;
      },
      RECOVERY_BOUND_MS,
    );
    // The killed gateway comes back, as its supervisor would restart it; the run stays where it is.
    const restarted = victim.start();
    const ended = await allEnded(runs, killedAt);
    await restarted;
    const invariants = await checkInvariants(runs);
    figures.gateway_kill = { takeover_ms: takeover, kill_to_last_run_end_ms: ended.lastEndMs, statuses: ended.statuses, ...invariants };
    expect(ended.statuses.every((s) => s === 'completed')).toBe(true);
    const resumed = await stack.postgres.query<{ data: { reason: string } }>(`SELECT data FROM run_events WHERE run_id = $1 AND type = 'run.resumed'`, [target.id]);
    expect(resumed[0].data.reason).toBe('worker_lost');
  });

  it("kill -9 of the executor's NATS node: runs and events carry on through the other two", async () => {
    const runs = await startRuns(3);
    await toolCallInFlight(runs);
    // The node the executor is connected to: every tool call's request and reply pass through it.
    const node = await stack.nats.nodeServing('runbox-executor-');
    expect(node).toBeGreaterThanOrEqual(0);
    const killedAt = Date.now();
    await stack.nats.kill(node);
    const ended = await allEnded(runs, killedAt);
    const invariants = await checkInvariants(runs);
    // A run started with the node still down is served too.
    const after = await startRuns(1);
    const afterEnded = await allEnded(after, Date.now());
    await checkInvariants(after);
    figures.nats_node_kill = { kill_to_last_run_end_ms: ended.lastEndMs, statuses: ended.statuses, new_run_ms: afterEnded.lastEndMs, ...invariants };
    if ([...ended.statuses, ...afterEnded.statuses].some((s) => s !== 'completed')) await printForDiagnosis([...runs, ...after]);
    // A request or reply passing through the node at the instant it died is lost (NATS
    // request/reply is at most once): that call's run may end failed, saying its outcome is
    // unknown, and is never sent again (docs/architecture.md, "Losing a NATS node"). Only a
    // call already out at the kill may end so; every other run, and the run started with the
    // node down, completes.
    for (const run of runs) {
      const [row] = await stack.postgres.query<{ status: string; error: string | null }>('SELECT status, error FROM runs WHERE id = $1', [run.id]);
      if (row.status === 'completed') continue;
      expect({ run: run.id, status: row.status, error: row.error }).toEqual({ run: run.id, status: 'failed', error: expect.stringContaining('may or may not have run') });
      const lost = await stack.postgres.query<{ started_ms: number }>(
        `SELECT (extract(epoch FROM started_at) * 1000)::float8 AS started_ms FROM tool_calls WHERE run_id = $1 AND status <> 'completed'`,
        [run.id],
      );
      expect(lost).toHaveLength(1);
      expect(lost[0].started_ms).toBeLessThanOrEqual(killedAt);
    }
    expect(afterEnded.statuses).toEqual(['completed']);
    await stack.nats.restart(node);
  });

  it('a PostgreSQL restart: requests answer 503 meanwhile, nothing exits, and the runs resume afterwards', async () => {
    const runs = await startRuns(3);
    await toolCallInFlight(runs);
    const downAt = Date.now();
    await stack.postgres.down();
    // Every gateway answers at once, with 503 and a body saying why.
    const answers: number[] = [];
    for (const gateway of live()) {
      const asked = Date.now();
      const res = await api('GET', `/v1/runs/${runs[0].id}`, undefined, gateway);
      answers.push(Date.now() - asked);
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('service_unavailable');
    }
    // Down for longer than a lease, so every claim lapses while nobody can renew it.
    await new Promise((r) => setTimeout(r, (LEASE_SECONDS + 1) * 1000 - (Date.now() - downAt)));
    await stack.postgres.up();
    const upAt = Date.now();
    const ended = await allEnded(runs, upAt);
    const invariants = await checkInvariants(runs);
    // A call that finished while the database was away kept its result: none is reported
    // interrupted (its outcome unknown), though the worker could store nothing for seconds.
    const calls = await stack.postgres.query<{ status: string }>('SELECT status FROM tool_calls WHERE run_id = ANY($1) ORDER BY run_id, seq', [runs.map((r) => r.id)]);
    figures.postgres_restart = { outage_ms: upAt - downAt, http_503_ms: answers, up_to_last_run_end_ms: ended.lastEndMs, statuses: ended.statuses, ...invariants };
    expect(ended.statuses.every((s) => s === 'completed')).toBe(true);
    if (calls.some((c) => c.status !== 'completed')) await printForDiagnosis(runs);
    expect(calls.map((c) => c.status)).toEqual(runs.flatMap(() => Array<string>(CALLS_PER_RUN).fill('completed')));
  });

  it('kill -9 of the executor, restarted under the same id: every run ends, no call runs twice, the sandboxes are taken back', async () => {
    const runs = await startRuns(3);
    await toolCallInFlight(runs);
    const killedAt = Date.now();
    await stack.executor.kill('SIGKILL');
    await stack.executor.start();
    const upAt = Date.now();
    const ended = await allEnded(runs, upAt);
    const invariants = await checkInvariants(runs);
    figures.executor_kill = { restart_ms: upAt - killedAt, up_to_last_run_end_ms: ended.lastEndMs, statuses: ended.statuses, ...invariants };
    // A run whose call was in the dead process's hands ends failed, saying its outcome is
    // unknown; the sessions' sandboxes were adopted, so a new run in one works.
    const again = await startRuns(1);
    await allEnded(again, Date.now());
    await checkInvariants(again);
  });

  it('deleting every session and one sweep leave no container or volume behind', async () => {
    for (const run of allRuns) expect((await api('DELETE', `/v1/sessions/${run.session_id}`)).status).toBeLessThan(300);
    const left = await eventually(
      'the containers and volumes to go',
      async () => {
        const counts = await countExecutorResources(stack.executorId);
        return counts.containers + counts.volumes === 0 ? counts : undefined;
      },
      (SWEEP_SECONDS + 5) * 1000,
    );
    expect(left).toEqual({ containers: 0, volumes: 0 });
  });
});

/** Server-sent events from a response body, as they arrive. */
async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id: number | undefined;
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) id = Number(line.slice(4));
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (id !== undefined) yield { id, event, data: JSON.parse(data.join('\n')) };
    }
  }
}
