import { applyRunDefaults, runDefaultsSchema } from './run-defaults';

describe('applyRunDefaults', () => {
  const tenant = { toolset: 'minimal' as const, approval_mode: 'auto' as const, limits: { max_output_chars: 5000 }, permissions: { deny: ['terminal(curl *)'] } };
  const ciKey = { toolset: 'coding' as const, approval_mode: 'prompt' as const, permissions: { deny: ['terminal(rm *)'] } };

  it('takes each field from the run, else the key, else the tenant, and says which', () => {
    const { options, sources } = applyRunDefaults({ model: 'm' }, ciKey, tenant);
    expect(options).toEqual({
      model: 'm',
      toolset: 'coding',
      approval_mode: 'prompt',
      limits: { max_output_chars: 5000 },
      permissions: { deny: ['terminal(curl *)', 'terminal(rm *)'] },
    });
    expect(sources).toEqual({ toolset: 'api_key', approval_mode: 'api_key', limits: 'tenant', 'permissions.deny': ['tenant', 'api_key'] });
  });

  it('a run naming tools replaces the saved toolset as a pair, and the reverse', () => {
    const withTools = applyRunDefaults({ tools: ['grep'] }, ciKey, tenant);
    expect(withTools.options.toolset).toBeUndefined();
    expect(withTools.options.tools).toEqual(['grep']);
    expect(withTools.sources.tools).toBe('run');
    expect(withTools.sources.toolset).toBeUndefined();
    const withToolset = applyRunDefaults({ toolset: 'research' }, { tools: ['*'] }, null);
    expect(withToolset.options).toEqual({ toolset: 'research' });
  });

  it('deny rules accumulate: a run adds its own and cannot drop the key or tenant ones', () => {
    const { options, sources } = applyRunDefaults({ permissions: { allow: ['terminal(*)'], deny: ['write_file(*)'] } }, ciKey, tenant);
    expect(options.permissions).toEqual({ allow: ['terminal(*)'], deny: ['terminal(curl *)', 'terminal(rm *)', 'write_file(*)'] });
    expect(sources['permissions.allow']).toBe('run');
    expect(sources['permissions.deny']).toEqual(['tenant', 'api_key', 'run']);
    const emptied = applyRunDefaults({ permissions: { deny: [] } }, ciKey, null);
    expect(emptied.options.permissions?.deny).toEqual(['terminal(rm *)']);
  });

  it('no defaults leave the request as it was, with every source "run"', () => {
    const request = { toolset: 'coding' as const, enabled: ['rag_index'], approval_mode: 'deny' as const };
    const { options, sources } = applyRunDefaults(request, null, null);
    expect(options).toEqual(request);
    expect(sources).toEqual({ toolset: 'run', enabled: 'run', approval_mode: 'run' });
  });

  it('the saved defaults accept only the fields a default may set', () => {
    expect(runDefaultsSchema.safeParse({ model: 'x' }).success).toBe(false);
    expect(runDefaultsSchema.safeParse({ toolset: 'nope' }).success).toBe(false);
    expect(runDefaultsSchema.safeParse(ciKey).success).toBe(true);
  });
});
