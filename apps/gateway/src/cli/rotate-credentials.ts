/**
 * Re-seals saved servers' credentials, MCP servers' headers and env, and OpenAPI services' credentials with RUNBOX_CREDENTIALS_KEY, opening what older keys
 * sealed with RUNBOX_CREDENTIALS_PREVIOUS_KEYS (docs/servers.md, rotating the key).
 *   node dist/apps/gateway/apps/gateway/src/cli/rotate-credentials.js
 */
import 'reflect-metadata';
import { loadConfig } from '@app/config';
import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import { rotateMcpSecrets } from '../mcp/mcp-secrets-rotation';
import { rotateOpenApiCredentials } from '../openapi/openapi-credential-rotation';
import { rotateCredentials } from '../servers/credential-rotation';

async function main(): Promise<void> {
  const config = loadConfig();
  if (!config.RUNBOX_CREDENTIALS_KEY) throw new Error('RUNBOX_CREDENTIALS_KEY is not set: it is the key to re-seal with');
  const cipher = new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS);
  const db = new PrismaService({ url: config.DATABASE_URL, systemUrl: config.SYSTEM_DATABASE_URL });
  try {
    const report = await rotateCredentials(db, cipher);
    process.stdout.write(`re-sealed ${report.resealed}, already current ${report.current}, changed meanwhile ${report.skipped} (key ${cipher.currentKeyId})\n`);
    const mcp = await rotateMcpSecrets(db, cipher);
    process.stdout.write(`MCP servers: re-sealed ${mcp.resealed}, already current ${mcp.current}, changed meanwhile ${mcp.skipped}\n`);
    const services = await rotateOpenApiCredentials(db, cipher);
    process.stdout.write(`OpenAPI services: re-sealed ${services.resealed}, already current ${services.current}, changed meanwhile ${services.skipped}\n`);
  } finally {
    await db.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`could not rotate the credentials key: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
