import { CredentialCipher } from '@app/ssh';

/** What a server's row keeps sealed: header values (remote servers) and environment values (stdio). */
export interface McpSecrets {
  headers: Record<string, string>;
  env: Record<string, string>;
}

export const NO_SECRETS: McpSecrets = { headers: {}, env: {} };

/** Binds a sealed value to its row: copied into another server or tenant, it does not open. */
export function mcpSecretsAad(tenantId: string, serverId: string): string {
  return `mcp_server:${tenantId}:${serverId}`;
}

export function sealMcpSecrets(cipher: CredentialCipher, tenantId: string, serverId: string, secrets: McpSecrets): string | null {
  if (Object.keys(secrets.headers).length === 0 && Object.keys(secrets.env).length === 0) return null;
  return cipher.seal(JSON.stringify(secrets), mcpSecretsAad(tenantId, serverId));
}

export function openMcpSecrets(cipher: CredentialCipher | undefined, tenantId: string, serverId: string, sealed: string | null): McpSecrets {
  if (!sealed) return NO_SECRETS;
  if (!cipher) throw new Error('this server has sealed headers or environment, and RUNBOX_CREDENTIALS_KEY is not set');
  const opened = JSON.parse(cipher.open(sealed, mcpSecretsAad(tenantId, serverId))) as Partial<McpSecrets>;
  return { headers: opened.headers ?? {}, env: opened.env ?? {} };
}
