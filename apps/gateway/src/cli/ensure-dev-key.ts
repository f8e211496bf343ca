/**
 * `./runbox up` runs this before starting the services: it makes sure tenant `default`
 * exists and that the key in the given file (.runbox/dev-api-key) is a live key of it,
 * issuing a new one when the file is missing or its key no longer works.
 */
import 'reflect-metadata';
import { loadConfig } from '@app/config';
import { PrismaService } from '@app/persistence';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { AuthService } from '../auth/auth.service';
import { TenantsRepository } from '../tenants/tenants.repository';
import { TenantsService } from '../tenants/tenants.service';

const DEFAULT_TENANT = 'default';

async function main(file: string): Promise<void> {
  const config = loadConfig();
  const db = new PrismaService({ url: config.DATABASE_URL, systemUrl: config.SYSTEM_DATABASE_URL });
  try {
    const repo = new TenantsRepository(db);
    const auth = new AuthService(repo);
    const tenants = new TenantsService(repo, auth);
    if (existsSync(file)) {
      const key = readFileSync(file, 'utf8').trim();
      const works = await auth.authenticate(`Bearer ${key}`).then(() => true, () => false);
      if (works) return;
    }
    const tenant = (await repo.findByName(DEFAULT_TENANT)) ?? (await tenants.create(DEFAULT_TENANT));
    const { key } = await tenants.issueKey(tenant.id, 'development key (runbox up)');
    writeFileSync(file, `${key}\n`, { mode: 0o600 });
  } finally {
    await db.close();
  }
}

main(process.argv[2] ?? '.runbox/dev-api-key').catch((err: unknown) => {
  process.stderr.write(`could not prepare the development key: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
