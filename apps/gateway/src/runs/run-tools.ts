import { Inject, Injectable, Optional } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { TenantTool } from '../tools/tenant-tool';
import { NO_TENANT_TOOLS, StoredTenantTools, TenantTools, TenantToolSet } from '../tools/tenant-tools';
import { ToolRegistry } from '../tools/tool-registry';
import { DroppedTool, selectTenantTools, selectTools, SelectedTool } from '../tools/tool-selection';
import { RunOptions } from './run-options';

/** The tool that starts sub-runs; how deep they may nest is the deployment's choice. */
export const DELEGATE_TASK = 'delegate_task';

export interface RunTools {
  /** What the model is offered and may call. */
  offered: Set<string>;
  /** Tools the run's selection named but the run may not use here, with the reason the model is told. */
  withheld: Map<string, string>;
  /** The offered tools with what put each there (the run object's and run.started's `tools`). */
  tools: SelectedTool[];
  /** What the selection named and the run does not get, and why (`tools_dropped`). */
  dropped: DroppedTool[];
}

/** A run's tools with the tenant-added ones it gets (MCP servers, OpenAPI services). */
export interface RunToolsWithTenant extends RunTools {
  /** The offered tenant tools, by name. */
  tenantTools: ReadonlyMap<string, TenantTool>;
  /** Sources that could not list their tools just now (reported on the run, then skipped). */
  problems: TenantToolSet['problems'];
}

/**
 * Which tools a run may use: its selection (TOOLS.md: the `tools` patterns or the toolset,
 * then enabled/disabled), less the tools that cannot run here: those the deployment has
 * not made available, and `delegate_task` when the run is already nested as deep as
 * RUNBOX_DELEGATE_MAX_DEPTH allows.
 */
@Injectable()
export class RunToolSelection {
  constructor(
    private readonly registry: ToolRegistry,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    @Optional() private readonly tenantTools?: TenantTools,
  ) {}

  /**
   * forRun plus the tools the run's tenant added, listed now (or `listing`, begun by
   * listTenantTools just before): a run asks again before each model turn, so a server's
   * changed tool list takes effect from the next turn.
   */
  async withTenantTools(
    run: { tenantId: string; sessionId: string; options: RunOptions; depth: number },
    signal?: AbortSignal,
    listing?: Promise<TenantToolSet>,
  ): Promise<RunToolsWithTenant> {
    const base = this.forRun(run);
    const listed = await (listing ?? this.listTenantTools(run.tenantId, run.sessionId, signal));
    const { options } = run;
    const picked = selectTenantTools(
      [...listed.tools.values()].map((t) => ({ name: t.definition.name, groups: t.groups })),
      { toolset: options.toolset ?? 'default', patterns: options.tools, enabled: options.enabled, disabled: options.disabled },
    );
    const tenantTools = new Map(picked.tools.map((t) => [t.name, listed.tools.get(t.name) as TenantTool]));
    // A name the built-in catalogue does not know but a tenant tool answers to is not unknown.
    const unknown = tenantToolNames(options)
      .filter((name) => !picked.matched.has(name))
      .map((name) => ({ name, reason: 'unknown' as const }));
    // A service's group name (`petstore`) has no `__`: forRun could not tell it from a typo.
    const baseDropped = base.dropped.filter((d) => !(d.reason === 'unknown' && picked.matched.has(d.name)));
    const dropped = [...baseDropped, ...picked.dropped, ...unknown];
    const tools = [...base.tools, ...picked.tools].sort((a, b) => a.name.localeCompare(b.name));
    return { offered: new Set(tools.map((t) => t.name)), withheld: base.withheld, tools, dropped, tenantTools, problems: listed.problems };
  }

  /**
   * The tools the tenant added, as the session sees them, made from `stored` when the
   * tenant's configuration was read ahead (readTenantTools); a listing that fails gives none.
   */
  listTenantTools(tenantId: string, sessionId: string, signal?: AbortSignal, stored?: StoredTenantTools): Promise<TenantToolSet> {
    if (!this.tenantTools) return Promise.resolve(NO_TENANT_TOOLS);
    return this.tenantTools.list(tenantId, { sessionId, signal }, stored).catch(() => NO_TENANT_TOOLS);
  }

  /** Starts reading the tenant's stored tool configuration for a listing to come (TenantTools.read). */
  readTenantTools(tenantId: string): StoredTenantTools | undefined {
    return this.tenantTools?.read(tenantId);
  }

  forRun(run: { options: RunOptions; depth: number }): RunTools {
    const { options } = run;
    const toolset = options.toolset ?? 'default';
    const selection = selectTools({
      toolset: { name: toolset, members: this.registry.toolset(toolset) },
      patterns: options.tools,
      enabled: options.enabled,
      disabled: options.disabled,
      registered: this.registry.names(),
    });
    const withheld = new Map<string, string>();
    for (const { name } of selection.tools) {
      const why = this.registry.unavailableReason(name) ?? (name === DELEGATE_TASK ? this.depthLimit(run.depth) : undefined);
      if (why !== undefined) withheld.set(name, why);
    }
    const tools = selection.tools.filter((t) => !withheld.has(t.name));
    // Names with `__` belong to tenant-added tools (mcp__server__tool, service__operation):
    // whether they are known is decided when the run lists its tenant's tools.
    const known = selection.dropped.filter((d) => !(d.reason === 'unknown' && namesTenantTool(d.name)));
    const dropped = [...known, ...[...withheld].map(([name, detail]) => ({ name, reason: 'unavailable' as const, detail }))];
    return { offered: new Set(tools.map((t) => t.name)), withheld, tools, dropped };
  }

  private depthLimit(depth: number): string | undefined {
    const maxDepth = this.config.RUNBOX_DELEGATE_MAX_DEPTH;
    return depth >= maxDepth ? depthLimitReason(depth, maxDepth) : undefined;
  }
}

/** Whether a `tools`/`enabled`/`disabled` entry can only mean a tenant-added tool or its group. */
function namesTenantTool(entry: string): boolean {
  return entry.includes('__');
}

function tenantToolNames(options: RunOptions): string[] {
  const entries = [...(options.tools ?? []), ...(options.enabled ?? []), ...(options.disabled ?? [])];
  return [...new Set(entries.filter(namesTenantTool))];
}

/** The tools part of a run object and of its run.started event. */
export function runToolsJson(tools: Pick<RunTools, 'tools' | 'dropped'>) {
  return { tools: tools.tools, tools_dropped: tools.dropped };
}

export function depthLimitReason(depth: number, maxDepth: number): string {
  if (maxDepth === 0) return `${DELEGATE_TASK} is turned off on this deployment (RUNBOX_DELEGATE_MAX_DEPTH=0), so do this task yourself`;
  return `this run is a sub-run ${depth} level${depth === 1 ? '' : 's'} deep and sub-runs may nest at most ${maxDepth} deep (RUNBOX_DELEGATE_MAX_DEPTH), so it cannot delegate further: do this task yourself`;
}
