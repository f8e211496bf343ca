import { queryDatabase, ScriptedModelServer } from '@app/testing';
import { eventually, gate, RunsClient } from '../support/runs';
import { TestStack } from '../support/test-stack';

/** A small pool keeps the test cheap; the policy is the same at the default 32. */
const WORKERS = 4;
const A_RUNS = WORKERS + 2;

/**
 * One tenant's slow runs fill the gateway's run workers; another tenant's trivial run must
 * still start at once, not after one of the slow runs ends. Reproduces the starvation seen
 * with 32 workers and 34 slow runs (tenant B waited 18.8 s for a 0.14 s run).
 */
describe('runs: workers are shared fairly between tenants', () => {
  const model = new ScriptedModelServer();
  const slow = gate();
  let stack: TestStack;
  let a: RunsClient;
  let b: RunsClient;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({
      executor: false,
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_RUN_WORKERS: String(WORKERS) },
    }).start();
    a = new RunsClient(stack, (await stack.createTenant('tenant-a', { max_concurrent_runs: 100 })).apiKey);
    b = new RunsClient(stack, (await stack.createTenant('tenant-b')).apiKey);
  });

  afterAll(async () => {
    slow.open();
    await stack?.stop();
    await model.stop();
  });

  /** Model requests of tenant A's runs so far: each is a run that got a worker. */
  const slowStarted = () => model.requests.filter((r) => ScriptedModelServer.firstUserMessage(r).startsWith('slow')).length;

  it("starts B's run within a second while A's slow runs hold every worker A may have", async () => {
    // A's runs wait for the model until the end of the test; B's is answered at once.
    model.route((r) => ScriptedModelServer.firstUserMessage(r).startsWith('slow'), ...Array.from({ length: A_RUNS }, () => () => slow.wait.then(() => ({ content: 'slow done' }))));
    model.route(ScriptedModelServer.sentBy('quick'), { content: 'quick done' });
    const slowRuns = [];
    for (let i = 0; i < A_RUNS; i++) slowRuns.push(await a.start({ input: `slow ${i}` }));
    // A alone gets every worker but the reserve (one of four).
    await eventually('A to hold its workers', async () => (slowStarted() >= WORKERS - 1 ? true : undefined));

    const quick = await b.start({ input: 'quick' });
    const done = await b.wait(quick.id, ['completed'], 20_000);
    const startMs = Date.parse(done.started_at) - Date.parse(done.created_at);
    expect(done.output).toBe('quick done');
    expect(startMs).toBeLessThan(1_000);

    // A never held more than its workers, and its other runs are still waiting, not lost.
    expect(slowStarted()).toBe(WORKERS - 1);
    slow.open();
    for (const run of slowRuns) expect(await a.wait(run.id, ['completed'], 60_000)).toMatchObject({ status: 'completed', output: 'slow done' });
    // Each of A's runs asked the model once: none ran twice.
    expect(slowStarted()).toBe(A_RUNS);
    const [{ n }] = await queryDatabase<{ n: number }>(stack.db.url, `SELECT count(*)::int AS n FROM runs WHERE lease_owner IS NOT NULL`);
    expect(n).toBe(0);
  });
});
