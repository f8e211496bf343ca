import { RunboxConfig } from '@app/config';
import { z } from 'zod';
import { GatewayTool } from '../tools/gateway-tool';
import { ToolRegistry } from '../tools/tool-registry';
import { DELEGATE_TASK, RunToolSelection } from './run-tools';

const delegate: GatewayTool = {
  definition: {
    name: DELEGATE_TASK,
    description: 'd',
    parameters: z.object({ task: z.string() }),
    mutating: false,
    toolsets: ['coding'],
    runsIn: 'gateway',
    timeoutSeconds: 900,
  },
  execute: () => Promise.resolve({ output: '', metadata: {}, is_error: false }),
};

function selection(maxDepth: number): RunToolSelection {
  return new RunToolSelection(new ToolRegistry([delegate]), { RUNBOX_DELEGATE_MAX_DEPTH: maxDepth } as RunboxConfig);
}

describe('RunToolSelection', () => {
  it('offers delegate_task while the run is less deep than RUNBOX_DELEGATE_MAX_DEPTH', () => {
    const tools = selection(2);
    expect(tools.forRun({ options: { toolset: 'coding' }, depth: 0 }).offered.has(DELEGATE_TASK)).toBe(true);
    expect(tools.forRun({ options: { toolset: 'coding' }, depth: 1 }).offered.has(DELEGATE_TASK)).toBe(true);
    const deepest = tools.forRun({ options: { toolset: 'coding' }, depth: 2 });
    expect(deepest.offered.has(DELEGATE_TASK)).toBe(false);
    expect(deepest.offered.has('read_file')).toBe(true);
    expect(deepest.withheld.get(DELEGATE_TASK)).toMatch(/2 levels deep .* at most 2 deep \(RUNBOX_DELEGATE_MAX_DEPTH\)/);
  });

  it('withholds only what the selection named, and 0 turns delegation off', () => {
    expect(selection(2).forRun({ options: { toolset: 'minimal' }, depth: 5 }).withheld.size).toBe(0);
    const off = selection(0).forRun({ options: { toolset: 'coding' }, depth: 0 });
    expect(off.offered.has(DELEGATE_TASK)).toBe(false);
    expect(off.withheld.get(DELEGATE_TASK)).toMatch(/turned off .*RUNBOX_DELEGATE_MAX_DEPTH=0/);
  });

  it('lists a withheld tool under dropped as unavailable, and not under tools', () => {
    const deepest = selection(1).forRun({ options: { toolset: 'coding' }, depth: 1 });
    expect(deepest.tools.map((t) => t.name)).not.toContain(DELEGATE_TASK);
    expect(deepest.tools).toContainEqual({ name: 'read_file', source: 'toolset:coding' });
    expect(deepest.dropped).toEqual([{ name: DELEGATE_TASK, reason: 'unavailable', detail: expect.stringMatching(/RUNBOX_DELEGATE_MAX_DEPTH/) }]);
  });

  it('withholds a tool the deployment has made unavailable', () => {
    const off: GatewayTool = { ...delegate, definition: { ...delegate.definition, name: 'web_search' }, unavailableReason: () => 'no search provider is configured' };
    const tools = new RunToolSelection(new ToolRegistry([off]), { RUNBOX_DELEGATE_MAX_DEPTH: 2 } as RunboxConfig);
    const run = tools.forRun({ options: { tools: ['*'] }, depth: 0 });
    expect(run.offered.has('web_search')).toBe(false);
    expect(run.withheld.get('web_search')).toBe('no search provider is configured');
    expect(run.dropped).toContainEqual({ name: 'web_search', reason: 'unavailable', detail: 'no search provider is configured' });
  });
});
