import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configSchema, RunboxConfig } from './config.schema';
import { loadConfig } from './load-config';

/**
 * The configuration tables in README.md and docs/ against the schema: every variable the
 * schema reads is documented, and every documented default is the one the schema applies.
 * Editing either side alone fails here, so the tables cannot drift silently.
 */
const ROOT = join(__dirname, '..', '..', '..');
const TABLES = ['README.md', 'docs/sandbox.md'];

/** Documented defaults the schema leaves unset because something after it decides them. */
const DECIDED_ELSEWHERE: Record<string, string> = {
  MIGRATION_DATABASE_URL: 'read only by ./runbox, to migrate as the schema owner',
  DATABASE_POOL_SIZE: "sized from the gateway's run workers (databasePoolSizes)",
  RUNBOX_EXECUTOR_ID: 'the executor names itself after its host',
  RUNBOX_EMBEDDINGS_BASE_URL: "the embeddings provider falls back to the chat model's URL",
  RUNBOX_EMBEDDINGS_API_KEY: "the embeddings provider falls back to the chat model's key",
};

interface DocumentedDefault {
  file: string;
  variable: string;
  /** The default column's text for this variable, backticks and explanations removed. */
  value: string;
}

/** Rows of every `| variable | meaning | default |` table in the file. */
function documentedDefaults(file: string): DocumentedDefault[] {
  const rows: DocumentedDefault[] = [];
  let inTable = false;
  for (const line of readFileSync(join(ROOT, file), 'utf8').split('\n')) {
    if (/^\|\s*variable\s*\|\s*meaning\s*\|\s*default\s*\|$/.test(line)) {
      inTable = true;
      continue;
    }
    if (!inTable || /^\|[-|\s]+\|$/.test(line)) continue;
    if (!line.startsWith('|')) {
      inTable = false;
      continue;
    }
    const cells = line.slice(1, -1).split(' | ');
    const variables = [...cells[0].matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]);
    const defaults = cells[cells.length - 1].trim();
    // One default per variable when a row names several ("1024, 1, 512").
    const values = variables.length > 1 ? defaults.split(', ') : [defaults];
    if (values.length !== variables.length) throw new Error(`${file}: ${variables.join(', ')} has ${values.length} defaults`);
    variables.forEach((variable, i) => rows.push({ file, variable, value: plain(values[i]) }));
  }
  return rows;
}

/** "`0` (loopback only)" → "0"; "none: admin routes disabled" → "none". */
function plain(text: string): string {
  return text
    .replace(/\s+\(.*\)$/, '')
    .replace(/^none:.*$/, 'none')
    .replace(/`/g, '')
    .trim();
}

const rows = TABLES.flatMap(documentedDefaults);
const schemaKeys = Object.keys(configSchema.shape) as (keyof RunboxConfig)[];
const defaults = loadConfig({});

describe('documented configuration', () => {
  it('finds the tables', () => {
    expect(rows.filter((r) => r.file === 'README.md').length).toBeGreaterThanOrEqual(schemaKeys.length);
    expect(rows.some((r) => r.file === 'docs/sandbox.md')).toBe(true);
  });

  it.each(schemaKeys)('README.md documents %s', (key) => {
    expect(rows.filter((r) => r.file === 'README.md').map((r) => r.variable)).toContain(key);
  });

  const applied = rows.filter((r) => !(r.variable in DECIDED_ELSEWHERE));
  it.each(applied.map((r) => [r.file, r.variable, r.value] as const))('%s: %s defaults to %s', (_file, variable, value) => {
    expect(schemaKeys).toContain(variable);
    const key = variable as keyof RunboxConfig;
    if (value === 'none') {
      expect(defaults[key]).toBeUndefined();
    } else {
      // Setting the documented value must change nothing: that is what a default means. A
      // value the schema does not accept (say "on" for a flag) fails here as well.
      expect(defaults[key]).toBeDefined();
      expect(loadConfig({ [variable]: value })[key]).toEqual(defaults[key]);
    }
  });

  const elsewhere = rows.filter((r) => r.variable in DECIDED_ELSEWHERE);
  it.each(elsewhere.map((r) => [r.file, r.variable, r.value] as const))('%s: %s has a default the schema leaves open', (_file, variable, value) => {
    expect(value).not.toBe('none');
    if (variable === 'MIGRATION_DATABASE_URL') {
      expect(schemaKeys).not.toContain(variable);
      expect(readFileSync(join(ROOT, 'runbox'), 'utf8')).toContain(`MIGRATION_DATABASE_URL:-${value}}`);
    } else {
      expect(defaults[variable as keyof RunboxConfig]).toBeUndefined();
    }
  });
});
