// Prisma CLI configuration. The CLI migrates through its bundled WASM schema engine and
// the pg driver adapter, so no engine binary is downloaded: installs work air-gapped. The
// adapter sends each migration script whole (function bodies and DO blocks hold semicolons).
import path from 'node:path';
import { defineConfig } from 'prisma/config';
import { WholeScriptPrismaPg } from './libs/persistence/src/whole-script-migrations';

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: path.join('prisma', 'schema.prisma'),
  migrations: { path: path.join('prisma', 'migrations') },
  adapter: async () =>
    new WholeScriptPrismaPg({ connectionString: process.env.MIGRATION_DATABASE_URL ?? process.env.DATABASE_URL }),
});
