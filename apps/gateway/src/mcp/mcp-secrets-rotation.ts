import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import type { RotationReport } from '../servers/credential-rotation';
import { mcpSecretsAad } from './mcp-secrets';

/**
 * Re-seals every MCP server's headers and env that an older key sealed, with the current key:
 * the MCP half of `rotate-credentials` (docs/servers.md, rotating the key). Deployment-wide, as
 * runbox_system; a row changed meanwhile is left as that change wrote it.
 */
export async function rotateMcpSecrets(db: PrismaService, cipher: CredentialCipher): Promise<RotationReport> {
  const rows = await db.system((tx) => tx.mcpServer.findMany({ where: { secrets: { not: null } }, select: { id: true, tenantId: true, secrets: true } }));
  const report: RotationReport = { resealed: 0, current: 0, skipped: 0 };
  for (const row of rows) {
    const sealed = row.secrets!;
    if (!cipher.isStale(sealed)) {
      report.current++;
      continue;
    }
    const bound = mcpSecretsAad(row.tenantId, row.id);
    const resealed = cipher.seal(cipher.open(sealed, bound), bound);
    const { count } = await db.system((tx) => tx.mcpServer.updateMany({ where: { id: row.id, secrets: sealed }, data: { secrets: resealed } }));
    if (count === 1) report.resealed++;
    else report.skipped++;
  }
  return report;
}
