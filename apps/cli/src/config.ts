import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** What `runbox login` stores. */
export interface StoredConfig {
  base_url?: string;
  api_key?: string;
}

/** Where the config lives: $XDG_CONFIG_HOME/runbox/config.json, or ~/.config/runbox/config.json. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return join(base, 'runbox', 'config.json');
}

export async function readConfig(path: string): Promise<StoredConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${path} is not valid JSON: run 'runbox login' again or fix the file`);
  }
  const record = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  return {
    base_url: typeof record.base_url === 'string' ? record.base_url : undefined,
    api_key: typeof record.api_key === 'string' ? record.api_key : undefined,
  };
}

/**
 * Writes the config readable by its owner only (0600, in a 0700 folder): it holds an API key.
 * The file is written whole under a temporary name and renamed, so a reader never sees half.
 */
export async function writeConfig(path: string, config: StoredConfig): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
  // The mode of writeFile only applies to a new file; a leftover one keeps its own.
  await chmod(temp, 0o600);
  await rename(temp, path);
}
