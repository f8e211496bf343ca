import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { ToolRegistry } from '../tools/tool-registry';
import { selectTools } from '../tools/tool-selection';
import { RunOptions } from './run-options';

/** The tool that starts sub-runs; how deep they may nest is the deployment's choice. */
export const DELEGATE_TASK = 'delegate_task';

export interface RunTools {
  /** What the model is offered and may call. */
  offered: Set<string>;
  /** Tools the run's selection named but the run may not use here, with the reason the model is told. */
  withheld: Map<string, string>;
}

/**
 * Which tools a run may use: its selection (TOOLS.md order: toolset, enabled/disabled, the
 * allowlist), less `delegate_task` when the run is already nested as deep as
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
    const offered = new Set(
      selectTools({
        toolset: this.registry.toolset(options.toolset ?? 'default'),
        enabled: options.enabled,
        disabled: options.disabled,
        patterns: options.tools,
        known: new Set(this.registry.names()),
      }),
    );
    const withheld = new Map<string, string>();
    const maxDepth = this.config.RUNBOX_DELEGATE_MAX_DEPTH;
    if (offered.has(DELEGATE_TASK) && run.depth >= maxDepth) {
      offered.delete(DELEGATE_TASK);
      withheld.set(DELEGATE_TASK, depthLimitReason(run.depth, maxDepth));
    }
    return { offered, withheld };
  }
}

export function depthLimitReason(depth: number, maxDepth: number): string {
  if (maxDepth === 0) return `${DELEGATE_TASK} is turned off on this deployment (RUNBOX_DELEGATE_MAX_DEPTH=0), so do this task yourself`;
  return `this run is a sub-run ${depth} level${depth === 1 ? '' : 's'} deep and sub-runs may nest at most ${maxDepth} deep (RUNBOX_DELEGATE_MAX_DEPTH), so it cannot delegate further: do this task yourself`;
}
