import { redactSecrets } from './redact-secrets';

describe('redactSecrets', () => {
  const key = `rbx_0123456789_${'a-b_C'.repeat(8)}xyz`;

  it('keeps an API key’s public prefix and hides the rest', () => {
    expect(redactSecrets(`Bearer ${key}.`)).toBe('Bearer rbx_0123456789_[redacted].');
  });

  it('hides every occurrence of each secret, raw or JSON-escaped', () => {
    expect(redactSecrets('t0ken-abc and t0ken-abc', ['t0ken-abc'])).toBe('[redacted] and [redacted]');
    expect(redactSecrets(JSON.stringify({ m: 'pa\\ss"word' }), ['pa\\ss"word'])).toBe('{"m":"[redacted]"}');
  });

  it('leaves text without secrets, and too-short secrets, alone', () => {
    expect(redactSecrets('nothing to see', ['abc'])).toBe('nothing to see');
  });
});
