import { apiKeyPrefix, generateApiKey, hashApiKey, hashesEqual } from './api-key';

describe('api keys', () => {
  it('generates well-formed keys whose prefix finds them and whose hash matches', () => {
    const { key, prefix, hash } = generateApiKey();
    expect(apiKeyPrefix(key)).toBe(prefix);
    expect(hash).toBe(hashApiKey(key));
    expect(hash).not.toContain(key.slice(15));
    expect(hashesEqual(hash, hashApiKey(key))).toBe(true);
    expect(hashesEqual(hash, hashApiKey(key + 'x'))).toBe(false);
  });

  it('rejects malformed keys before any lookup', () => {
    for (const bad of ['', 'rbx_', 'Bearer x', 'rbx_short_secret', 'x'.repeat(5000)]) {
      expect(apiKeyPrefix(bad)).toBeUndefined();
    }
  });

  it('never repeats a key', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey().key));
    expect(keys.size).toBe(200);
  });
});
