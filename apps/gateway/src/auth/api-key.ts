import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY_PATTERN = /^rbx_[0-9a-z]{10}_[0-9A-Za-z_-]{43}$/;

/**
 * API keys look like `rbx_<10 public chars>_<43 secret chars>`. The part before the second
 * underscore is the prefix: stored and shown, used to find the key's row. Only a SHA-256 of
 * the whole key is stored, and it is compared in constant time.
 */
export function generateApiKey(): { key: string; prefix: string; hash: string } {
  const pub = randomBytes(10)
    .toString('base64url')
    .toLowerCase()
    .replace(/[^0-9a-z]/g, '0')
    .slice(0, 10);
  const secret = randomBytes(32).toString('base64url');
  const key = `rbx_${pub}_${secret}`;
  return { key, prefix: `rbx_${pub}`, hash: hashApiKey(key) };
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The prefix of a well-formed key, or undefined for anything malformed. */
export function apiKeyPrefix(key: string): string | undefined {
  return KEY_PATTERN.test(key) ? key.slice(0, 14) : undefined;
}

export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
