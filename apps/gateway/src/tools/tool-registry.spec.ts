import { TOOLS_MD_TOOLSETS } from '@app/testing';
import { DelegateTaskTool } from '../delegation/delegate-task.tool';
import { SubRuns } from '../delegation/sub-runs';
import { SessionSearchTool } from '../history/session-search.tool';
import { MemoryTool } from '../memory/memory.tool';
import { RagIndexTool } from '../rag/rag-index.tool';
import { RagSearchTool } from '../rag/rag-search.tool';
import { VpsRunTool } from '../servers/vps-run.tool';
import { VPS_DOWNLOAD_TOOL, VPS_UPLOAD_TOOL } from '../servers/vps-transfer-tools';
import { SkillTool } from '../skills/skill.tool';
import { TodoTool } from '../todos/todo.tool';
import { BrowserTool } from '../web/browser/browser.tool';
import { WebFetchTool } from '../web/web-fetch.tool';
import { WebSearchTool } from '../web/web-search.tool';
import { loadConfig } from '@app/config';
import { GatewayTool } from './gateway-tool';
import { ToolRegistry } from './tool-registry';

/**
 * The tools of TOOLS.md's catalogue that Runbox implements, written out by hand: a tool that
 * goes missing from the registry, or one registered without being listed here, fails the test.
 */
const IMPLEMENTED = [
  'delegate_task',
  'edit_file',
  'glob',
  'grep',
  'list_files',
  'memory',
  'rag_index',
  'rag_search',
  'read_file',
  'session_search',
  'skill',
  'terminal',
  'todo',
  'vps_download',
  'vps_run',
  'vps_upload',
  'web_fetch',
  'web_search',
  'browser',
  'write_file',
];

/** The registry as the gateway builds it: file tools and terminal, every gateway-side tool, delegate_task. */
function productionRegistry(): ToolRegistry {
  // Only the tools' definitions are read here; their services are never called.
  const unused = undefined as never;
  const gatewayTools: GatewayTool[] = [
    new MemoryTool(unused),
    new SessionSearchTool(unused),
    new RagIndexTool(unused, unused, unused),
    new RagSearchTool(unused, unused),
    new TodoTool(unused),
    new SkillTool(unused),
    new DelegateTaskTool(unused as SubRuns, unused),
    new VpsRunTool(unused),
    new WebFetchTool(unused, unused),
    new WebSearchTool(loadConfig({}), unused),
    new BrowserTool(unused, unused, unused, unused),
  ];
  const registry = new ToolRegistry(gatewayTools);
  for (const definition of [VPS_UPLOAD_TOOL, VPS_DOWNLOAD_TOOL]) registry.register(definition);
  return registry;
}

describe('ToolRegistry toolsets', () => {
  const registry = productionRegistry();

  it('registers exactly the implemented tools of the catalogue', () => {
    expect(registry.names()).toEqual([...IMPLEMENTED].sort());
  });

  it.each(Object.keys(TOOLS_MD_TOOLSETS))('%s holds the implemented tools TOOLS.md puts in it, and nothing else', (name) => {
    const expected = TOOLS_MD_TOOLSETS[name as 'minimal'].filter((t) => IMPLEMENTED.includes(t)).sort();
    expect(expected.length).toBeGreaterThan(0);
    expect(registry.toolset(name as 'minimal')).toEqual(expected);
  });

  it('default is the union of the four named toolsets, all is every implemented tool', () => {
    const union = new Set(Object.values(TOOLS_MD_TOOLSETS).flat().filter((t) => IMPLEMENTED.includes(t)));
    expect(registry.toolset('default')).toEqual([...union].sort());
    // rag_index is in no named toolset: only `all` offers it.
    expect(registry.toolset('default')).not.toContain('rag_index');
    // Nor are the vps_* tools (seed 000): they act on the tenant's own servers.
    for (const vps of ['vps_run', 'vps_upload', 'vps_download']) expect(registry.toolset('default')).not.toContain(vps);
    expect(registry.toolset('all')).toEqual([...IMPLEMENTED].sort());
  });
});
