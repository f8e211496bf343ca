import { checkReadiness } from './readiness';

describe('checkReadiness', () => {
  it('is ready when every check answers', async () => {
    const result = await checkReadiness([
      { name: 'nats', probe: async () => true },
      { name: 'docker', probe: async () => true },
    ]);
    expect(result).toEqual({ ready: true, checks: { nats: 'ok', docker: 'ok' }, reasons: [] });
  });

  it('names each check that failed, threw or hung, with why', async () => {
    const result = await checkReadiness(
      [
        { name: 'nats', probe: async () => false },
        { name: 'docker', probe: () => Promise.reject(new Error('connect ENOENT /var/run/docker.sock')) },
        { name: 'slow', probe: () => new Promise<boolean>(() => undefined) },
        { name: 'fine', probe: async () => true },
      ],
      50,
    );
    expect(result.ready).toBe(false);
    expect(result.checks).toEqual({ nats: 'down', docker: 'down', slow: 'down', fine: 'ok' });
    expect(result.reasons).toEqual(['nats: not answering', 'docker: connect ENOENT /var/run/docker.sock', 'slow: no answer within 50 ms']);
  });
});
