import { RunboxConfig } from '@app/config';
import { z } from 'zod';
import type { Logger } from 'pino';
import type { DiscoveryService } from '@nestjs/core';
import { RunToolSelection } from '../runs/run-tools';
import { TenantTool, TenantToolListing, TenantToolSource } from './tenant-tool';
import { TENANT_TOOL_LIST_TIMEOUT_MS, TenantTools } from './tenant-tools';
import { ToolRegistry } from './tool-registry';
import { ToolRouter } from './tool-router';
import type { ExecutorClient } from './executor.client';

const silent = { warn: () => undefined } as unknown as Logger;

function tenantTool(name: string, group: string, output = `ran ${name}`, mutating = true): TenantTool {
  return {
    definition: { name, description: `the ${name} tool`, parameters: z.record(z.string(), z.unknown()), mutating, toolsets: [], runsIn: 'gateway', timeoutSeconds: 30 },
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    groups: [group],
    origin: `mcp:${group.split('__')[1]}`,
    execute: (_ctx, args) => Promise.resolve({ output: `${output} ${JSON.stringify(args)}`, metadata: {}, is_error: false }),
  };
}

/** A source whose stored configuration is the listing itself; it counts its reads. */
class FixedSource implements TenantToolSource<TenantToolListing> {
  reads: string[] = [];
  constructor(private readonly byTenant: Record<string, TenantToolListing | Error>) {}
  read(tenantId: string): Promise<TenantToolListing> {
    this.reads.push(tenantId);
    const listing = this.byTenant[tenantId] ?? { tools: [], problems: [] };
    return listing instanceof Error ? Promise.reject(listing) : Promise.resolve(listing);
  }
  list(_tenantId: string, stored: TenantToolListing): Promise<TenantToolListing> {
    return Promise.resolve(stored);
  }
}

function tenantTools(registry: ToolRegistry, ...sources: TenantToolSource[]): TenantTools {
  const tools = new TenantTools({ getProviders: () => [] } as unknown as DiscoveryService, registry, silent);
  for (const source of sources) tools.addSource(source);
  return tools;
}

const github = [tenantTool('mcp__github__search', 'mcp__github', 'found', false), tenantTool('mcp__github__create_issue', 'mcp__github')];
const pets = [tenantTool('pets__listPets', 'pets')];

describe('TenantTools', () => {
  it("gives each tenant only its own sources' tools", async () => {
    const tools = tenantTools(new ToolRegistry(), new FixedSource({ a: { tools: github, problems: [] }, b: { tools: pets, problems: [] } }));
    expect([...(await tools.list('a')).tools.keys()].sort()).toEqual(['mcp__github__create_issue', 'mcp__github__search']);
    expect([...(await tools.list('b')).tools.keys()]).toEqual(['pets__listPets']);
    expect(await tools.find('b', 'mcp__github__search')).toBeUndefined();
  });

  it('skips a tool whose name a built-in tool already has, and says so', async () => {
    const shadow = tenantTool('terminal', 'mcp__evil');
    const listed = await tenantTools(new ToolRegistry(), new FixedSource({ a: { tools: [shadow, ...pets], problems: [] } })).list('a');
    expect([...listed.tools.keys()]).toEqual(['pets__listPets']);
    expect(listed.problems).toEqual([expect.objectContaining({ key: 'name_taken:terminal' })]);
  });

  it('turns a source that throws into a problem and keeps the other sources', async () => {
    const tools = tenantTools(new ToolRegistry(), new FixedSource({ a: new Error('connection refused') }), new FixedSource({ a: { tools: pets, problems: [] } }));
    const listed = await tools.list('a');
    expect([...listed.tools.keys()]).toEqual(['pets__listPets']);
    expect(listed.problems).toEqual([{ key: 'source:0', event: { type: 'tool.source_failed', data: { source: 'FixedSource', error: 'connection refused' } } }]);
  });

  it('lists from a configuration read ahead, without reading it again', async () => {
    const source = new FixedSource({ a: { tools: pets, problems: [] }, b: { tools: github, problems: [] } });
    const tools = tenantTools(new ToolRegistry(), source);
    const stored = tools.read('a');
    expect(source.reads).toEqual(['a']);

    expect([...(await tools.list('a', {}, stored)).tools.keys()]).toEqual(['pets__listPets']);
    expect(source.reads).toEqual(['a']);
    // Read for another tenant: never used for this one.
    expect([...(await tools.list('b', {}, stored)).tools.keys()].sort()).toEqual(['mcp__github__create_issue', 'mcp__github__search']);
    expect(source.reads).toEqual(['a', 'b']);
  });

  it('keeps a failed read that no listing awaits from failing the process, and lists it as a problem', async () => {
    const unhandled = jest.fn();
    process.on('unhandledRejection', unhandled);
    try {
      const throwing: TenantToolSource = {
        read: () => {
          throw new Error('not even a promise');
        },
        list: () => Promise.resolve({ tools: [], problems: [] }),
      };
      const tools = tenantTools(new ToolRegistry(), new FixedSource({ a: new Error('database away') }), throwing);
      tools.read('a');
      const stored = tools.read('a');
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).not.toHaveBeenCalled();
      expect((await tools.list('a', {}, stored)).problems).toEqual([
        { key: 'source:0', event: { type: 'tool.source_failed', data: { source: 'FixedSource', error: 'database away' } } },
        { key: 'source:1', event: { type: 'tool.source_failed', data: { source: 'Object', error: 'not even a promise' } } },
      ]);
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });

  it('stops waiting for a source that does not answer', async () => {
    jest.useFakeTimers();
    try {
      const hanging: TenantToolSource = { read: () => Promise.resolve([]), list: () => new Promise(() => undefined) };
      const listing = tenantTools(new ToolRegistry(), hanging).list('a');
      jest.advanceTimersByTime(TENANT_TOOL_LIST_TIMEOUT_MS + 1);
      const listed = await listing;
      expect(listed.tools.size).toBe(0);
      expect(listed.problems[0].event.data.error).toMatch(/longer than/);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('RunToolSelection with tenant tools', () => {
  const registry = new ToolRegistry();
  const selection = new RunToolSelection(registry, { RUNBOX_DELEGATE_MAX_DEPTH: 1 } as RunboxConfig, tenantTools(registry, new FixedSource({ a: { tools: [...github, ...pets], problems: [] } })));
  const forRun = (options: Record<string, unknown>) => selection.withTenantTools({ tenantId: 'a', sessionId: 's', options, depth: 0 });
  const offered = async (options: Record<string, unknown>) => [...(await forRun(options)).tenantTools.keys()].sort();

  it('offers them in toolset all only, not in the named toolsets', async () => {
    expect(await offered({ toolset: 'all' })).toEqual(['mcp__github__create_issue', 'mcp__github__search', 'pets__listPets']);
    expect(await offered({ toolset: 'default' })).toEqual([]);
    expect(await offered({})).toEqual([]);
  });

  it('admits a whole server by its group name, a tool by its name, and "*" admits all', async () => {
    expect(await offered({ tools: ['mcp__github'] })).toEqual(['mcp__github__create_issue', 'mcp__github__search']);
    expect(await offered({ tools: ['pets__listPets', 'read_file'] })).toEqual(['pets__listPets']);
    expect(await offered({ tools: ['*'] })).toHaveLength(3);
    expect(await offered({ tools: ['*', '!mcp__github'] })).toEqual(['pets__listPets']);
    expect(await offered({ toolset: 'minimal', enabled: ['mcp__github__search'] })).toEqual(['mcp__github__search']);
    expect(await offered({ toolset: 'all', disabled: ['mcp__github'] })).toEqual(['pets__listPets']);
  });

  it('reports a tenant-tool name that matches nothing as unknown, and a matched one not at all', async () => {
    const run = await forRun({ tools: ['mcp__github', 'mcp__gitlab', 'read_file'] });
    expect(run.dropped).toEqual([{ name: 'mcp__gitlab', reason: 'unknown' }]);
    expect(run.tools).toContainEqual({ name: 'mcp__github__search', source: 'tools:mcp__github' });
    expect(run.offered.has('read_file')).toBe(true);
  });
});

describe('ToolRouter and tenant tools', () => {
  const registry = new ToolRegistry();
  const router = new ToolRouter(registry, {} as ExecutorClient, undefined, tenantTools(registry, new FixedSource({ a: { tools: pets, problems: [] } })));

  it('runs a tenant tool a run was offered and marks where its result came from', async () => {
    const result = await router.execute({ tenantId: 'a', sessionId: 's', executorId: null, tenantTools: new Map([['mcp__github__search', github[0]]]) }, 'mcp__github__search', { q: 'x' });
    expect(result.output).toBe('found {"q":"x"}');
    expect(result.metadata).toEqual({ origin: 'mcp:github' });
  });

  it("finds the tenant's tool for a direct call, and no other tenant's", async () => {
    expect((await router.execute({ tenantId: 'a', sessionId: 's', executorId: null }, 'pets__listPets', {})).output).toBe('ran pets__listPets {}');
    await expect(router.execute({ tenantId: 'b', sessionId: 's', executorId: null }, 'pets__listPets', {})).rejects.toThrow(/unknown tool/);
  });

  it('does not run a tenant tool a run was not offered', async () => {
    await expect(router.execute({ tenantId: 'a', sessionId: 's', executorId: null, tenantTools: new Map() }, 'pets__listPets', {})).rejects.toThrow(/unknown tool/);
  });

  it('cuts a long result to the output budget', async () => {
    const long = tenantTool('pets__dump', 'pets', 'x'.repeat(5000));
    const result = await router.execute({ tenantId: 'a', sessionId: 's', executorId: null, maxOutputChars: 1000, tenantTools: new Map([['pets__dump', long]]) }, 'pets__dump', {});
    expect(result.output.length).toBeLessThan(1500);
  });
});
