import { Writable } from 'node:stream';
import { createLogger } from './logger';

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
