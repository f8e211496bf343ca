import { randomBytes } from 'node:crypto';
import { CredentialCipher, CredentialsUnreadableError } from './credential-cipher';

const key = () => randomBytes(32).toString('base64');

describe('CredentialCipher', () => {
  const secret = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n';

  it('seals so that the value names its key and holds no plaintext, and opens it again', () => {
    const cipher = new CredentialCipher(key());
    const sealed = cipher.seal(secret, 'tenant:a:srv_1');
    expect(sealed).toMatch(new RegExp(`^v1\\.${cipher.currentKeyId}\\.`));
    expect(sealed).not.toContain('b3BlbnNzaC1rZXktdjEAAAAA');
    expect(cipher.open(sealed, 'tenant:a:srv_1')).toBe(secret);
    // A fresh IV each time: sealing twice never gives the same text.
    expect(cipher.seal(secret, 'tenant:a:srv_1')).not.toBe(sealed);
  });

  it('refuses a value moved to another row, tampered with, or sealed with an unknown key', () => {
    const cipher = new CredentialCipher(key());
    const sealed = cipher.seal(secret, 'tenant:a:srv_1');
    expect(() => cipher.open(sealed, 'tenant:b:srv_1')).toThrow(CredentialsUnreadableError);
    const parts = sealed.split('.');
    parts[4] = Buffer.from('x' + Buffer.from(parts[4], 'base64url').toString('latin1').slice(1), 'latin1').toString('base64url');
    expect(() => cipher.open(parts.join('.'), 'tenant:a:srv_1')).toThrow('failed authentication');
    expect(() => new CredentialCipher(key()).open(sealed, 'tenant:a:srv_1')).toThrow(/neither RUNBOX_CREDENTIALS_KEY nor/);
  });

  it('opens values sealed with a previous key during a rotation and marks them stale', () => {
    const oldKey = key();
    const before = new CredentialCipher(oldKey).seal(secret, 'row');
    const newKey = key();
    const rotated = new CredentialCipher(newKey, [oldKey]);
    expect(rotated.isStale(before)).toBe(true);
    expect(rotated.open(before, 'row')).toBe(secret);
    const resealed = rotated.seal(rotated.open(before, 'row'), 'row');
    expect(rotated.isStale(resealed)).toBe(false);
    // Once the old key is dropped, only the re-sealed value still opens.
    const after = new CredentialCipher(newKey);
    expect(after.open(resealed, 'row')).toBe(secret);
    expect(() => after.open(before, 'row')).toThrow(CredentialsUnreadableError);
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => new CredentialCipher(randomBytes(16).toString('base64'))).toThrow('32 random bytes');
  });
});
