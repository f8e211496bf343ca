import { PrismaService } from '@app/persistence';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { AuthService } from '../auth/auth.service';
import { TenantsRepository } from '../tenants/tenants.repository';
import { TenantsService } from '../tenants/tenants.service';

export const DEV_TENANT = 'default';

/**
 * Makes sure tenant `default` exists and that `file` holds a live key of it: a file whose
 * key still works is kept; a missing file, or one whose key was revoked or belongs to a
 * database that was reset, gets a new key. The file is readable by its owner only.
 */
export async function ensureDevKey(db: PrismaService, file: string): Promise<'kept' | 'issued'> {
  const repo = new TenantsRepository(db);
  const auth = new AuthService(repo);
  const tenants = new TenantsService(repo, auth);
  if (existsSync(file)) {
    const key = readFileSync(file, 'utf8').trim();
    const works = await auth.authenticate(`Bearer ${key}`).then(
      () => true,
      () => false,
    );
    if (works) return 'kept';
  }
  const tenant = (await repo.findByName(DEV_TENANT)) ?? (await tenants.create(DEV_TENANT));
  const { key } = await tenants.issueKey(tenant.id, 'development key (runbox up)');
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  chmodSync(file, 0o600); // the mode above applies only to a file it creates
  return 'issued';
}
