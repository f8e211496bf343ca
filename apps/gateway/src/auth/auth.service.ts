import { Injectable } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { apiKeyPrefix, hashApiKey, hashesEqual } from './api-key';
import { ApiKeyRecord, ApiKeyStore } from './api-key-store';
import { ApiKeyCache } from './api-key-cache';

const UNAUTHORIZED = 'missing or invalid API key';

/** Turns a bearer token into a tenant. Every failure is the same 401, whatever the cause. */
@Injectable()
export class AuthService {
  private readonly cache = new ApiKeyCache<ApiKeyRecord>(3_000);

  constructor(private readonly keys: ApiKeyStore) {}

  async authenticate(authorization: string | undefined): Promise<{ tenantId: string; apiKeyId: string }> {
    const key = bearerToken(authorization);
    const prefix = key === undefined ? undefined : apiKeyPrefix(key);
    if (key === undefined || prefix === undefined) throw unauthorized();
    const record = await this.lookup(prefix);
    // Hash and compare even when the prefix is unknown, so timing does not tell them apart.
    const matches = hashesEqual(hashApiKey(key), record?.keyHash ?? '0'.repeat(64));
    if (!record || !matches || record.revoked) throw unauthorized();
    return { tenantId: record.tenantId, apiKeyId: record.id };
  }

  forget(prefix: string): void {
    this.cache.forget(prefix);
  }

  clearCache(): void {
    this.cache.clear();
  }

  private async lookup(prefix: string): Promise<ApiKeyRecord | null> {
    const cached = this.cache.get(prefix);
    if (cached) return cached.value;
    const record = await this.keys.findKeyByPrefix(prefix);
    this.cache.set(prefix, record);
    return record;
  }
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer +(\S{1,512})\s*$/i.exec(header);
  return match?.[1];
}

function unauthorized(): AppError {
  return new AppError(ErrorCode.Unauthorized, UNAUTHORIZED);
}
