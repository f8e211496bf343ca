import 'reflect-metadata';
import { loadConfig } from '@app/config';
import { keepServingOnStrayErrors, LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { createGateway } from './bootstrap';

async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createGateway(config);
  keepServingOnStrayErrors(app.get<Logger>(LOGGER));
  await app.listen(config.PORT, '0.0.0.0');
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
