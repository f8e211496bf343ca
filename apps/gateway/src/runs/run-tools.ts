import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { ToolRegistry } from '../tools/tool-registry';
import { DroppedTool, selectTools, SelectedTool } from '../tools/tool-selection';
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
  ) {}

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
    const dropped = [...selection.dropped, ...[...withheld].map(([name, detail]) => ({ name, reason: 'unavailable' as const, detail }))];
    return { offered: new Set(tools.map((t) => t.name)), withheld, tools, dropped };
  }

  private depthLimit(depth: number): string | undefined {
    const maxDepth = this.config.RUNBOX_DELEGATE_MAX_DEPTH;
    return depth >= maxDepth ? depthLimitReason(depth, maxDepth) : undefined;
  }
}

/** The tools part of a run object and of its run.started event. */
export function runToolsJson(tools: Pick<RunTools, 'tools' | 'dropped'>) {
  return { tools: tools.tools, tools_dropped: tools.dropped };
}

export function depthLimitReason(depth: number, maxDepth: number): string {
  if (maxDepth === 0) return `${DELEGATE_TASK} is turned off on this deployment (RUNBOX_DELEGATE_MAX_DEPTH=0), so do this task yourself`;
  return `this run is a sub-run ${depth} level${depth === 1 ? '' : 's'} deep and sub-runs may nest at most ${maxDepth} deep (RUNBOX_DELEGATE_MAX_DEPTH), so it cannot delegate further: do this task yourself`;
}
