/**
 * Which tools a run may use (TOOLS.md, "Toolsets"), and why each is there or not:
 * 1. the base: with `tools` (seed 003's patterns) every registered tool they admit,
 *    otherwise the toolset's members;
 * 2. `enabled` adds names, `disabled` removes them (disabled wins);
 * 3. availability (left to the caller, which knows the deployment and the run's depth).
 */

/** A tool a run has, and what put it there: `toolset:<name>`, `tools:<pattern>` or `enabled`. */
export interface SelectedTool {
  name: string;
  source: string;
}

/**
 * A name the run's selection mentioned that it does not get:
 * `unknown` (no registered tool has it, or a pattern matched nothing), `disabled` (removed
 * by `disabled` or a `!name` pattern) or `unavailable` (it cannot run here; `detail` says why).
 */
export interface DroppedTool {
  name: string;
  reason: 'unknown' | 'disabled' | 'unavailable';
  detail?: string;
}

export interface ToolSelection {
  tools: SelectedTool[];
  dropped: DroppedTool[];
}

export interface ToolSelectionInput {
  /** Used when no `patterns` are given. */
  toolset: { name: string; members: readonly string[] };
  patterns?: readonly string[];
  enabled?: readonly string[];
  disabled?: readonly string[];
  /** Every registered tool. */
  registered: readonly string[];
}

export function selectTools({ toolset, patterns, enabled = [], disabled = [], registered }: ToolSelectionInput): ToolSelection {
  const known = new Set(registered);
  const chosen = new Map<string, string>();
  const dropped = new Map<string, DroppedTool>();
  const drop = (entry: DroppedTool) => {
    if (!dropped.has(entry.name)) dropped.set(entry.name, entry);
  };

  if (patterns === undefined) {
    for (const name of toolset.members) chosen.set(name, `toolset:${toolset.name}`);
  } else {
    const { admitted, excluded, unmatched } = admitByPatterns(registered, patterns);
    for (const [name, pattern] of admitted) chosen.set(name, `tools:${pattern}`);
    for (const name of excluded) drop({ name, reason: 'disabled' });
    for (const pattern of unmatched) drop({ name: pattern, reason: 'unknown' });
  }
  for (const name of enabled) {
    if (!known.has(name)) drop({ name, reason: 'unknown' });
    else if (!chosen.has(name)) chosen.set(name, 'enabled');
  }
  for (const name of disabled) {
    if (!known.has(name)) drop({ name, reason: 'unknown' });
    else if (chosen.delete(name)) drop({ name, reason: 'disabled' });
  }
  const tools = [...chosen].map(([name, source]) => ({ name, source })).sort((a, b) => a.name.localeCompare(b.name));
  return { tools, dropped: [...dropped.values()] };
}

/**
 * Seed 003's allowlist over `names`: `*` admits everything, an exact name admits that tool,
 * `!name` excludes it and wins over `*` wherever it stands. `*` may also appear inside a
 * pattern (`mcp__github__*`). Returns each admitted name with the first pattern admitting
 * it, the names an exclusion took away from an inclusion, and the patterns (either kind)
 * that match no name at all.
 */
export function admitByPatterns(
  names: Iterable<string>,
  patterns: readonly string[],
): { admitted: Map<string, string>; excluded: string[]; unmatched: string[] } {
  const includes = patterns.filter((p) => !p.startsWith('!'));
  const excludes = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1));
  const admitted = new Map<string, string>();
  const excluded: string[] = [];
  const used = new Set<string>();
  for (const name of names) {
    const include = includes.find((p) => matches(p, name));
    const exclude = excludes.find((p) => matches(p, name));
    for (const p of includes) if (matches(p, name)) used.add(p);
    for (const p of excludes) if (matches(p, name)) used.add(`!${p}`);
    if (include === undefined) continue;
    if (exclude !== undefined) excluded.push(name);
    else admitted.set(name, include);
  }
  const unmatched = patterns.filter((p) => !used.has(p));
  return { admitted, excluded, unmatched };
}

/** The names of `candidates` the patterns admit (see admitByPatterns). */
export function applyAllowlist(candidates: Set<string>, patterns: string[]): Set<string> {
  return new Set(admitByPatterns(candidates, patterns).admitted.keys());
}

function matches(pattern: string, name: string): boolean {
  if (!pattern.includes('*')) return pattern === name;
  const re = new RegExp(`^${pattern.split('*').map(escapeRegExp).join('.*')}$`);
  return re.test(name);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** What a run's selection gives of the tools its tenant added (see selectTenantTools). */
export interface TenantToolSelection {
  tools: SelectedTool[];
  dropped: DroppedTool[];
  /** The `tools`, `enabled` and `disabled` entries that named a tenant tool or its group. */
  matched: Set<string>;
}

/**
 * The tenant-added tools (MCP servers, OpenAPI services) a run gets. They belong to toolset
 * `all` only; otherwise a run gets them by naming them, or their group (`mcp__github` for
 * every tool of the server `github`), in `tools` (patterns, `!` excludes and wins) or
 * `enabled`; `disabled` takes them away by name or group, like any tool.
 */
export function selectTenantTools(
  tools: ReadonlyArray<{ name: string; groups: readonly string[] }>,
  { toolset, patterns, enabled = [], disabled = [] }: Omit<ToolSelectionInput, 'registered' | 'toolset'> & { toolset: string },
): TenantToolSelection {
  const matched = new Set<string>();
  const hits = (entry: string, tool: { name: string; groups: readonly string[] }) => {
    const hit = matches(entry, tool.name) || tool.groups.some((g) => matches(entry, g));
    if (hit) matched.add(entry);
    return hit;
  };
  const chosen = new Map<string, string>();
  const dropped: DroppedTool[] = [];
  for (const tool of tools) {
    if (patterns === undefined) {
      if (toolset === 'all') chosen.set(tool.name, 'toolset:all');
    } else {
      const include = patterns.filter((p) => !p.startsWith('!')).find((p) => hits(p, tool));
      const exclude = patterns.filter((p) => p.startsWith('!')).find((p) => hits(p.slice(1), tool));
      if (exclude !== undefined) matched.add(exclude);
      if (include !== undefined && exclude !== undefined) dropped.push({ name: tool.name, reason: 'disabled' });
      else if (include !== undefined) chosen.set(tool.name, `tools:${include}`);
    }
    const enabler = enabled.find((e) => hits(e, tool));
    if (enabler !== undefined && !chosen.has(tool.name)) chosen.set(tool.name, 'enabled');
    if (disabled.some((d) => hits(d, tool)) && chosen.delete(tool.name)) dropped.push({ name: tool.name, reason: 'disabled' });
  }
  const selected = [...chosen].map(([name, source]) => ({ name, source })).sort((a, b) => a.name.localeCompare(b.name));
  return { tools: selected, dropped, matched };
}
