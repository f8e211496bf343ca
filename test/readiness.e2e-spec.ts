import { TestStack } from './support/test-stack';

/**
 * GET /readyz with a dependency gone: it answers 503 naming what is down, promptly, rather
 * than hanging on a connection that is trying to come back. (Executor down is in
 * bad-input.e2e-spec.ts; Postgres is shared by every suite on the machine and stays up.)
 */
describe('readiness', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await new TestStack().start();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('is ready with everything up, and says NATS is down once it is', async () => {
    const up = await stack.request('GET', '/readyz');
    expect(up.status).toBe(200);
    expect(up.body).toEqual({ status: 'ready', checks: { postgres: 'ok', nats: 'ok', executor: 'ok' } });

    await stack.nats.stop();
    const started = Date.now();
    const down = await stack.request('GET', '/readyz');
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({
      status: 'not_ready',
      checks: { postgres: 'ok', nats: 'down', executor: 'down' },
      error: { code: 'service_unavailable', message: 'not ready: nats, executor down' },
    });
    // Within the probe's own bounds (a Kubernetes probe times out after a few seconds).
    expect(Date.now() - started).toBeLessThan(10_000);
    // Liveness does not depend on it.
    expect((await stack.request('GET', '/healthz')).status).toBe(200);
  });
});
