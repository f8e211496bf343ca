import { PrismaService } from '@app/persistence';
import { CredentialCipher, credentialsAad } from '@app/ssh';

export interface RotationReport {
  /** Rows re-sealed with the current key. */
  resealed: number;
  /** Rows already sealed with it. */
  current: number;
  /** Rows changed by someone else while this ran (they were sealed with the current key anyway). */
  skipped: number;
}

/**
 * Re-seals every saved server's credentials that an older key sealed, with the current key
 * (docs/servers.md, rotating the key). Deployment-wide, as runbox_system. Each row is
 * replaced only if it still holds what was read, so a PATCH made meanwhile is kept.
 */
export async function rotateCredentials(db: PrismaService, cipher: CredentialCipher): Promise<RotationReport> {
  const rows = await db.system((tx) => tx.savedServer.findMany({ select: { id: true, tenantId: true, credentials: true } }));
  const report: RotationReport = { resealed: 0, current: 0, skipped: 0 };
  for (const row of rows) {
    if (!cipher.isStale(row.credentials)) {
      report.current++;
      continue;
    }
    const bound = credentialsAad(row.tenantId, row.id);
    const resealed = cipher.seal(cipher.open(row.credentials, bound), bound);
    const { count } = await db.system((tx) => tx.savedServer.updateMany({ where: { id: row.id, credentials: row.credentials }, data: { credentials: resealed } }));
    if (count === 1) report.resealed++;
    else report.skipped++;
  }
  return report;
}
