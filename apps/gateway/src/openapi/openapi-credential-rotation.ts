import { PrismaService } from '@app/persistence';
import { CredentialCipher } from '@app/ssh';
import type { RotationReport } from '../servers/credential-rotation';
import { serviceAuthAad } from './openapi-services.service';

/**
 * Re-seals every OpenAPI service credential an older key sealed, with the current key, as
 * rotateCredentials does for saved servers (deployment-wide, as runbox_system; a row is
 * replaced only if it still holds what was read).
 */
export async function rotateOpenApiCredentials(db: PrismaService, cipher: CredentialCipher): Promise<RotationReport> {
  const rows = await db.system((tx) => tx.openApiService.findMany({ where: { auth: { not: null } }, select: { id: true, tenantId: true, auth: true } }));
  const report: RotationReport = { resealed: 0, current: 0, skipped: 0 };
  for (const row of rows) {
    const sealed = row.auth!;
    if (!cipher.isStale(sealed)) {
      report.current++;
      continue;
    }
    const bound = serviceAuthAad(row.tenantId, row.id);
    const resealed = cipher.seal(cipher.open(sealed, bound), bound);
    const { count } = await db.system((tx) => tx.openApiService.updateMany({ where: { id: row.id, auth: sealed }, data: { auth: resealed } }));
    if (count === 1) report.resealed++;
    else report.skipped++;
  }
  return report;
}
