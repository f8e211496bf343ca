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
