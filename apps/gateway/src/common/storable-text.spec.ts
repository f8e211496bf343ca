import { findUnstorableText, toStorableText, unstorableProblem } from './storable-text';

describe('storable text', () => {
  it('accepts ordinary text, including characters outside the basic plane', () => {
    expect(unstorableProblem('héllo 😀 \u0001 \ufffd')).toBeUndefined();
    expect(findUnstorableText({ a: ['x', { 'ключ': '😀' }], n: 1, b: null }, 'body')).toBeUndefined();
  });

  it('names NUL and lone surrogates of either half', () => {
    expect(unstorableProblem('a\u0000b')).toMatch(/NUL character \(U\+0000\)/);
    expect(unstorableProblem('\ud800')).toMatch(/lone surrogate \(U\+D800\)/);
    expect(unstorableProblem('x\udc00')).toMatch(/lone surrogate \(U\+DC00\)/);
    expect(unstorableProblem('\ud83d')).toMatch(/U\+D83D/);
  });

  it('names the field by its path, and the object for a bad key without echoing the key', () => {
    expect(findUnstorableText({ permissions: { allow: ['ok', 'bad\u0000'] } }, 'body')).toEqual({
      field: 'body.permissions.allow.1',
      message: expect.stringMatching(/NUL/),
    });
    const key = findUnstorableText({ metadata: { 'k\ud800': 1 } }, 'body');
    expect(key).toEqual({ field: 'body.metadata', message: expect.stringMatching(/^a key contains a lone surrogate/) });
    expect(findUnstorableText('\u0000', 'query.query')?.field).toBe('query.query');
  });

  it('walks very deep values without recursion', () => {
    let deep: unknown = 'bad\u0000';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(findUnstorableText(deep, 'body')?.message).toMatch(/NUL/);
  });

  it('replaces what cannot be stored with U+FFFD and keeps everything else', () => {
    expect(toStorableText('a\u0000b\ud800c😀')).toBe('a\ufffdb\ufffdc😀');
    expect(toStorableText('plain')).toBe('plain');
  });
});
