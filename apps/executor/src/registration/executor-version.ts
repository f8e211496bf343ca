import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Runbox's version, from the package.json above this file (in the source tree and in the
 * built image alike), so gateways can tell executors of an upgrade apart while it rolls.
 */
export function runboxVersion(from = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
      const version = typeof parsed === 'object' && parsed !== null && 'version' in parsed ? parsed.version : undefined;
      if (typeof version === 'string' && version.length <= 64) return version;
    }
    if (dirname(dir) === dir) return 'unknown';
  }
}
