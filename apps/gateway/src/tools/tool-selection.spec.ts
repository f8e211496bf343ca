import { admitByPatterns, applyAllowlist, selectTools } from './tool-selection';

const registered = ['read_file', 'write_file', 'terminal', 'grep', 'rag_index', 'mcp__gh__issues', 'mcp__gh__prs'];
const coding = { name: 'coding', members: ['read_file', 'write_file', 'terminal', 'grep'] };
const names = (s: ReturnType<typeof selectTools>) => s.tools.map((t) => t.name);

describe('selectTools', () => {
  it('starts from the toolset when no patterns are given, each tool saying so', () => {
    const s = selectTools({ toolset: coding, registered });
    expect(s.tools).toContainEqual({ name: 'terminal', source: 'toolset:coding' });
    expect(names(s)).toEqual(['grep', 'read_file', 'terminal', 'write_file']);
    expect(s.dropped).toEqual([]);
  });

  it('adds enabled and removes disabled, disabled winning, and records both', () => {
    const s = selectTools({ toolset: coding, enabled: ['rag_index', 'mcp__gh__prs'], disabled: ['terminal', 'mcp__gh__prs'], registered });
    expect(names(s)).toEqual(['grep', 'rag_index', 'read_file', 'write_file']);
    expect(s.tools).toContainEqual({ name: 'rag_index', source: 'enabled' });
    expect(s.dropped).toEqual([
      { name: 'terminal', reason: 'disabled' },
      { name: 'mcp__gh__prs', reason: 'disabled' },
    ]);
  });

  it('patterns form the base from every registered tool, not from the toolset', () => {
    const s = selectTools({ toolset: coding, patterns: ['rag_index'], registered });
    expect(s.tools).toEqual([{ name: 'rag_index', source: 'tools:rag_index' }]);
  });

  it('* admits every registered tool and !name wins wherever it stands', () => {
    expect(names(selectTools({ toolset: coding, patterns: ['*'], registered }))).toEqual([...registered].sort());
    const s = selectTools({ toolset: coding, patterns: ['!terminal', '*'], registered });
    expect(names(s)).not.toContain('terminal');
    expect(s.tools).toContainEqual({ name: 'grep', source: 'tools:*' });
    expect(s.dropped).toEqual([{ name: 'terminal', reason: 'disabled' }]);
  });

  it('names that match nothing still leave a run, and are recorded as unknown', () => {
    const s = selectTools({ toolset: coding, patterns: ['grep', 'local_shell', '!nope', 'mcp__x__*'], enabled: ['ghost'], disabled: ['phantom'], registered });
    expect(names(s)).toEqual(['grep']);
    expect(s.dropped).toEqual([
      { name: 'local_shell', reason: 'unknown' },
      { name: '!nope', reason: 'unknown' },
      { name: 'mcp__x__*', reason: 'unknown' },
      { name: 'ghost', reason: 'unknown' },
      { name: 'phantom', reason: 'unknown' },
    ]);
  });
});

describe('admitByPatterns / applyAllowlist', () => {
  const all = new Set(registered);
  it('an empty list admits nothing', () => {
    expect(applyAllowlist(all, []).size).toBe(0);
  });
  it('prefix patterns select a namespace and exclusions can carve it', () => {
    expect([...applyAllowlist(all, ['mcp__gh__*', '!mcp__gh__prs'])]).toEqual(['mcp__gh__issues']);
  });
  it('says which pattern admitted a tool: the first that matches', () => {
    expect(admitByPatterns(['grep'], ['*', 'grep']).admitted.get('grep')).toBe('*');
  });
  it('treats regex characters in names literally', () => {
    expect(applyAllowlist(new Set(['a.b', 'axb']), ['a.b']).has('axb')).toBe(false);
  });
});
