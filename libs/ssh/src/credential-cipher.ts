import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Seals saved servers' credentials with AES-256-GCM. A sealed value reads
 * `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts): the key id (the first 8 hex digits
 * of the key's SHA-256) says which key sealed it, so after a rotation values sealed with the
 * previous key still open while `rotate-credentials` re-seals them with the current one.
 * The AAD binds a value to its row (tenant and server id): a sealed blob copied into another
 * row does not open.
 */
export class CredentialCipher {
  private readonly current: { id: string; key: Buffer };
  private readonly byId = new Map<string, Buffer>();

  /** `current` seals; `previous` keys only open (during a rotation). Each is 32 bytes, base64. */
  constructor(current: string, previous: string[] = []) {
    this.current = keyEntry(current, 'RUNBOX_CREDENTIALS_KEY');
    for (const k of [this.current, ...previous.map((p) => keyEntry(p, 'RUNBOX_CREDENTIALS_PREVIOUS_KEYS'))]) this.byId.set(k.id, k.key);
  }

  get currentKeyId(): string {
    return this.current.id;
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', this.current.id, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
  }

  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== 'v1') throw new CredentialsUnreadableError('not a sealed value');
    const key = this.byId.get(parts[1]);
    if (!key) throw new CredentialsUnreadableError(`sealed with key ${parts[1]}, which is neither RUNBOX_CREDENTIALS_KEY nor in RUNBOX_CREDENTIALS_PREVIOUS_KEYS`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(parts[2], 'base64url'));
      decipher.setAAD(Buffer.from(aad));
      decipher.setAuthTag(Buffer.from(parts[3], 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(parts[4], 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new CredentialsUnreadableError('the sealed value failed authentication');
    }
  }

  /** True when the value was sealed with an older key and should be re-sealed. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.current.id;
  }
}

export class CredentialsUnreadableError extends Error {}

function keyEntry(base64: string, name: string): { id: string; key: Buffer } {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== 32) throw new Error(`${name}: a key is 32 random bytes in base64 (openssl rand -base64 32)`);
  return { id: createHash('sha256').update(key).digest('hex').slice(0, 8), key };
}
