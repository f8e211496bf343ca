/**
 * Which tools a run may use (TOOLS.md): the toolset, then `enabled` adds and `disabled`
 * removes (disabled wins), then the `tools` allowlist of patterns narrows the result.
 */
export interface ToolSelectionInput {
  toolset: string[];
  enabled?: string[];
  disabled?: string[];
  patterns?: string[];
  known: Set<string>;
}

export function selectTools({ toolset, enabled = [], disabled = [], patterns, known }: ToolSelectionInput): string[] {
  const chosen = new Set(toolset);
  for (const name of enabled) if (known.has(name)) chosen.add(name);
  for (const name of disabled) chosen.delete(name);
  const result = patterns === undefined ? chosen : applyAllowlist(chosen, patterns);
  return [...result].sort();
}

/**
 * Seed 003's allowlist: `*` admits everything, an exact name admits that tool, `!name`
 * excludes it and wins over `*` wherever it stands; names that match nothing are ignored.
 * `*` may also appear inside a pattern (`mcp__github__*`).
 */
export function applyAllowlist(candidates: Set<string>, patterns: string[]): Set<string> {
  const includes = patterns.filter((p) => !p.startsWith('!'));
  const excludes = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1));
  const out = new Set<string>();
  for (const name of candidates) {
    if (excludes.some((p) => matches(p, name))) continue;
    if (includes.some((p) => matches(p, name))) out.add(name);
  }
  return out;
}

function matches(pattern: string, name: string): boolean {
  if (!pattern.includes('*')) return pattern === name;
  const re = new RegExp(`^${pattern.split('*').map(escapeRegExp).join('.*')}$`);
  return re.test(name);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
