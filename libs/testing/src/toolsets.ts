/**
 * TOOLS.md's toolset table, verbatim: what each named toolset holds. A deployment offers
 * the members it has registered; `default` is the union of these four, `all` every tool.
 */
export const TOOLS_MD_TOOLSETS: Readonly<Record<'minimal' | 'coding' | 'research' | 'browser', readonly string[]>> = {
  minimal: ['read_file', 'list_files', 'grep', 'todo'],
  coding: ['read_file', 'write_file', 'edit_file', 'list_files', 'glob', 'grep', 'terminal', 'todo', 'skill', 'delegate_task'],
  research: ['read_file', 'web_search', 'web_fetch', 'browser', 'grep', 'todo', 'memory', 'session_search', 'rag_search', 'skill'],
  browser: ['browser', 'web_search', 'web_fetch', 'read_file', 'write_file', 'todo'],
};

/** The tools TOOLS.md puts in `toolset`, of those `registered` holds, sorted. */
export function expectedToolset(toolset: string, registered: readonly string[]): string[] {
  const named = TOOLS_MD_TOOLSETS as Record<string, readonly string[]>;
  const members =
    toolset === 'all' ? registered : toolset === 'default' ? Object.values(named).flat() : (named[toolset] ?? []);
  return [...new Set(members)].filter((t) => registered.includes(t)).sort();
}
