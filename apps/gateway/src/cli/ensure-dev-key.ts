/**
 * `./runbox up` runs this before starting the services: it makes sure tenant `default`
 * exists and that the key in the given file (.runbox/dev-api-key) is a live key of it,
 * issuing a new one when the file is missing or its key no longer works.
 */
import 'reflect-metadata';
import { loadConfig } from '@app/config';
import { PrismaService } from '@app/persistence';
import { ensureDevKey } from './dev-key';

async function main(file: string): Promise<void> {
  const config = loadConfig();
  const db = new PrismaService({ url: config.DATABASE_URL, systemUrl: config.SYSTEM_DATABASE_URL });
  try {
    await ensureDevKey(db, file);
  } finally {
    await db.close();
  }
}

main(process.argv[2] ?? '.runbox/dev-api-key').catch((err: unknown) => {
  process.stderr.write(`could not prepare the development key: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
