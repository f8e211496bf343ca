import { Writable } from 'node:stream';
import { createLogger } from './logger';
import { acceptRequestId, withRequestId } from './request-id';

function capture(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { stream, lines };
}

describe('createLogger', () => {
  it('redacts secrets wherever they are logged', () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', destination: stream });
    logger.info({ apiKey: 'rbx_secret1', req: { headers: { authorization: 'Bearer rbx_secret2' } } }, 'hello');
    const out = lines.join('');
    expect(out).toContain('"service":"test"');
    expect(out).not.toContain('rbx_secret1');
    expect(out).not.toContain('rbx_secret2');
    expect(out).toContain('[redacted]');
  });
});

describe('createLogger with known secrets', () => {
  it('removes configured secret values and API keys from any part of a line', () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', destination: stream, secrets: ['admin-token-123', 'with"quote"secret'] });
    const apiKey = `rbx_abcdefghij_${'S'.repeat(43)}`;
    logger.warn({ error: `provider said: bad key admin-token-123 and ${apiKey}` }, 'message mentions with"quote"secret too');
    const out = lines.join('');
    expect(out).not.toContain('admin-token-123');
    expect(out).not.toContain('S'.repeat(43));
    expect(out).not.toContain('quote');
    expect(out).toContain('rbx_abcdefghij_[redacted]');
    expect(out.match(/\[redacted\]/g)).toHaveLength(3);
  });
});

describe('createLogger with a correlation id', () => {
  it('adds the current request id to every line written while it is set, and none outside', async () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', destination: stream });
    await withRequestId('req-42', async () => {
      await Promise.resolve();
      logger.child({ runId: 'run_1' }).info('inside');
    });
    logger.info('outside');
    const [inside, outside] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(inside).toMatchObject({ request_id: 'req-42', runId: 'run_1', msg: 'inside' });
    expect(outside.request_id).toBeUndefined();
  });
});

describe('acceptRequestId', () => {
  it('takes ids of the usual shapes', () => {
    for (const id of ['0b1e4a52-8f0c-4a8e-9a38-2f1c2b8d0e11', '01HZX3J4K5M6N7P8Q9R0S1T2V3', 'abc.def:123', 'dGVzdA==', 'x'.repeat(128)]) {
      expect(acceptRequestId(id)).toBe(id);
    }
  });

  it('refuses empty, over-long, and ids with spaces, quotes, controls or non-ASCII', () => {
    for (const id of ['', 'x'.repeat(129), 'a b', 'a"b', 'a\nb', 'a\u0000b', 'é', '<script>', undefined, 42]) {
      expect(acceptRequestId(id)).toBeUndefined();
    }
  });
});
