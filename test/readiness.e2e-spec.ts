import { ExecutorHttpServer } from '../apps/executor/src/observability/executor-http.server';
import { TestStack } from './support/test-stack';

/**
 * GET /readyz (the gateway's, and the executor's on its own port) with a dependency gone: it answers 503 naming what is down, promptly, rather
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
    // The executor's own probe, on its own port.
    const executorUrl = `http://127.0.0.1:${stack.executorProvider(ExecutorHttpServer).boundPort}`;
    const executorUp = await stack.request('GET', '/readyz', { baseUrl: executorUrl });
    expect(executorUp.status).toBe(200);
    expect(executorUp.body).toEqual({ status: 'ready', checks: { subscriptions: 'ok', nats: 'ok', docker: 'ok' } });

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

    // The executor says so too, naming NATS as the reason, and stays live.
    const executorDown = await stack.request('GET', '/readyz', { baseUrl: executorUrl });
    expect(executorDown.status).toBe(503);
    expect(executorDown.body).toMatchObject({
      status: 'not_ready',
      checks: { subscriptions: 'ok', nats: 'down', docker: 'ok' },
      reasons: [expect.stringMatching(/^nats: /)],
      error: { code: 'service_unavailable', message: expect.stringContaining('nats: ') },
    });
    expect((await stack.request('GET', '/healthz', { baseUrl: executorUrl })).status).toBe(200);
  });
});
