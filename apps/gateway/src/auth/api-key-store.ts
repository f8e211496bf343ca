/** What authentication needs to know of a stored API key. */
export interface ApiKeyRecord {
  id: string;
  tenantId: string;
  prefix: string;
  keyHash: string;
  revoked: boolean;
}

/**
 * Where AuthService finds keys. The tenants' repository keeps them (the Tenancy module binds
 * it); authentication depends only on this, so the admin side, which issues and revokes
 * keys and clears AuthService's cache, can build on authentication and not the reverse.
 */
export abstract class ApiKeyStore {
  abstract findKeyByPrefix(prefix: string): Promise<ApiKeyRecord | null>;
}
