#!/usr/bin/env node
// Runs the Prisma CLI without its Rust engines. Generation works in WASM and migrations go
// through the driver adapter (prisma.config.ts), but the CLI still checks for the engine
// files before it starts and would try to download them; pointing it at any existing file
// satisfies that check. See https://github.com/prisma/prisma/issues/25683 (engine-less CLI).
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const env = {
  PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false',
  PRISMA_QUERY_ENGINE_LIBRARY: '/bin/false',
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
  CHECKPOINT_DISABLE: '1',
  ...process.env,
};
const cli = path.join(__dirname, '..', 'node_modules', 'prisma', 'build', 'index.js');
const result = spawnSync(process.execPath, [cli, ...process.argv.slice(2)], { stdio: 'inherit', env });
process.exit(result.status ?? 1);
