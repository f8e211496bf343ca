import { applyAllowlist, selectTools } from './tool-selection';

const known = new Set(['read_file', 'write_file', 'terminal', 'grep', 'mcp__gh__issues', 'mcp__gh__prs']);

describe('selectTools', () => {
  it('adds enabled and removes disabled, disabled winning', () => {
    expect(
      selectTools({ toolset: ['read_file', 'terminal'], enabled: ['grep', 'write_file'], disabled: ['terminal', 'write_file'], known }),
    ).toEqual(['grep', 'read_file']);
  });

  it('ignores enabled names that no tool has', () => {
    expect(selectTools({ toolset: ['read_file'], enabled: ['nope'], known })).toEqual(['read_file']);
  });

  it('narrows with the allowlist after toolsets', () => {
    expect(selectTools({ toolset: ['read_file', 'terminal'], patterns: ['read_file', 'write_file'], known })).toEqual(['read_file']);
  });
});

describe('applyAllowlist', () => {
  const all = new Set(known);
  it('* admits everything', () => {
    expect([...applyAllowlist(all, ['*'])].sort()).toEqual([...known].sort());
  });
  it('an exclusion wins over * wherever it stands', () => {
    expect(applyAllowlist(all, ['!terminal', '*']).has('terminal')).toBe(false);
    expect(applyAllowlist(all, ['*', '!terminal']).has('terminal')).toBe(false);
    expect(applyAllowlist(all, ['*', '!terminal']).has('grep')).toBe(true);
  });
  it('unknown names are ignored, not errors', () => {
    expect([...applyAllowlist(all, ['local_shell', 'grep'])]).toEqual(['grep']);
  });
  it('an empty list admits nothing', () => {
    expect(applyAllowlist(all, []).size).toBe(0);
  });
  it('prefix patterns select a namespace and exclusions can carve it', () => {
    expect([...applyAllowlist(all, ['mcp__gh__*', '!mcp__gh__prs'])]).toEqual(['mcp__gh__issues']);
  });
  it('treats regex characters in names literally', () => {
    expect(applyAllowlist(new Set(['a.b', 'axb']), ['a.b']).has('axb')).toBe(false);
  });
});
