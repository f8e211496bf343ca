import { ToolRegistry } from './tool-registry';

/** TOOLS.md's toolset table, verbatim. */
const TOOLSETS: Record<string, string[]> = {
  minimal: ['read_file', 'list_files', 'grep', 'todo'],
  coding: ['read_file', 'write_file', 'edit_file', 'list_files', 'glob', 'grep', 'terminal', 'todo', 'skill', 'delegate_task'],
  research: ['read_file', 'web_search', 'web_fetch', 'browser', 'grep', 'todo', 'memory', 'session_search', 'rag_search', 'skill'],
  browser: ['browser', 'web_search', 'web_fetch', 'read_file', 'write_file', 'todo'],
};

describe('ToolRegistry toolsets', () => {
  const registry = new ToolRegistry();

  it.each(Object.keys(TOOLSETS))('%s holds exactly the registered tools TOOLS.md puts in it', (name) => {
    const registered = new Set(registry.names());
    expect(registry.toolset(name as 'minimal')).toEqual(TOOLSETS[name].filter((t) => registered.has(t)).sort());
  });

  it('default is the union of the four, all is every registered tool', () => {
    const union = new Set((['minimal', 'coding', 'research', 'browser'] as const).flatMap((n) => registry.toolset(n)));
    expect(registry.toolset('default')).toEqual([...union].sort());
    expect(registry.toolset('all')).toEqual(registry.names());
  });

  it('has the file tools and terminal in the toolsets TOOLS.md names', () => {
    expect(registry.toolset('minimal')).toEqual(expect.arrayContaining(['grep', 'list_files', 'read_file']));
    expect(registry.toolset('coding')).toEqual(expect.arrayContaining(['edit_file', 'glob', 'grep', 'list_files', 'read_file', 'terminal', 'write_file']));
  });
});
