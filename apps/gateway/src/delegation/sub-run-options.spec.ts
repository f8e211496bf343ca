import { subRunOptions, subRunTools } from './sub-run-options';

describe('subRunTools', () => {
  const parent = new Set(['delegate_task', 'grep', 'list_files', 'read_file', 'todo']);

  it('gives the parent’s tools when the call narrows nothing', () => {
    expect(subRunTools(parent, {})).toEqual(['delegate_task', 'grep', 'list_files', 'read_file', 'todo']);
  });

  it('never adds a tool the parent lacks, whatever the toolset or allowlist asks for', () => {
    const coding = ['read_file', 'write_file', 'edit_file', 'list_files', 'glob', 'grep', 'terminal', 'todo', 'skill', 'delegate_task'];
    expect(subRunTools(parent, { toolset: coding })).toEqual(['delegate_task', 'grep', 'list_files', 'read_file', 'todo']);
    expect(subRunTools(parent, { tools: ['terminal', 'write_file', 'read_file'] })).toEqual(['read_file']);
    expect(subRunTools(parent, { toolset: coding, tools: ['*'] })).toEqual(['delegate_task', 'grep', 'list_files', 'read_file', 'todo']);
  });

  it('narrows by toolset, then by the allowlist with exclusions winning', () => {
    expect(subRunTools(parent, { toolset: ['read_file', 'list_files', 'grep', 'todo'] })).toEqual(['grep', 'list_files', 'read_file', 'todo']);
    expect(subRunTools(parent, { tools: ['*', '!delegate_task'] })).toEqual(['grep', 'list_files', 'read_file', 'todo']);
    expect(subRunTools(parent, { tools: ['*_files', 'grep'] })).toEqual(['grep', 'list_files']);
    expect(subRunTools(parent, { tools: [] })).toEqual([]);
  });
});

describe('subRunOptions', () => {
  it('inherits how the parent works and fixes the tools to exactly the given names', () => {
    const options = subRunOptions(
      {
        model: 'm',
        system: 'be brief {{tools}}',
        toolset: 'coding',
        enabled: ['memory'],
        disabled: ['terminal'],
        tools: ['*'],
        approval_mode: 'prompt',
        permissions: { deny: ['terminal(rm *)'] },
        limits: { hard_stop_after: 5 },
        memory_scope: 'user:1',
      },
      ['read_file'],
    );
    expect(options).toEqual({
      model: 'm',
      system: 'be brief {{tools}}',
      approval_mode: 'prompt',
      permissions: { deny: ['terminal(rm *)'] },
      limits: { hard_stop_after: 5 },
      memory_scope: 'user:1',
      toolset: 'all',
      tools: ['read_file'],
    });
  });

  it('leaves out what the parent did not set', () => {
    expect(subRunOptions({}, [])).toEqual({ toolset: 'all', tools: [] });
  });
});
