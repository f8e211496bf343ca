import { TOOLS_MD_TOOLSETS } from '@app/testing';
import { ToolRegistry } from './tool-registry';

describe('ToolRegistry toolsets', () => {
  const registry = new ToolRegistry();

  it.each(Object.keys(TOOLS_MD_TOOLSETS))('%s holds exactly the registered tools TOOLS.md puts in it', (name) => {
    const registered = new Set(registry.names());
    expect(registry.toolset(name as 'minimal')).toEqual(TOOLS_MD_TOOLSETS[name as 'minimal'].filter((t) => registered.has(t)).sort());
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
