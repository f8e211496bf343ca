import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { z } from 'zod';
import { DELEGATE_TASK, depthLimitReason } from '../runs/run-tools';
import { GatewayTool, GatewayToolContext, GatewayToolResult } from '../tools/gateway-tool';
import { TOOLSET_NAMES } from '../tools/tool-registry';
import { SubRuns } from './sub-runs';

const parameters = z
  .object({
    task: z
      .string()
      .trim()
      .min(1, 'must not be empty')
      .max(100_000)
      .describe(
        'The whole task, written to stand alone: the sub-agent sees nothing of this conversation. Give the goal, the paths and facts it needs, the constraints, and what its answer must contain.',
      ),
    toolset: z.enum(TOOLSET_NAMES).optional().describe('Give it only the tools of this toolset (it never gets a tool you do not have).'),
    tools: z
      .array(z.string().min(1).max(129))
      .max(200)
      .optional()
      .describe('Narrow its tools further with an allowlist: exact names, `*`, `prefix*`, and `!name` to leave one out.'),
  })
  .strict();

type DelegateArgs = z.infer<typeof parameters>;

/**
 * delegate_task: a sub-agent with a fresh context for a self-contained subtask; only its
 * final answer comes back. Its calls are judged one by one in its own run, so the call
 * itself does not mutate (TOOLS.md).
 */
@Injectable()
export class DelegateTaskTool implements GatewayTool {
  readonly definition = {
    name: DELEGATE_TASK,
    description:
      'Hand a self-contained subtask to a sub-agent that starts with an empty context and returns only its final answer. Use it for research or exploration whose details would flood this conversation (searching a codebase, reading many files, trying things out) when only the conclusion matters. The sub-agent cannot see this conversation, so write the task to stand alone. It works in the same workspace with your tools or fewer (toolset, tools) under the same approval rules. Do small steps yourself.',
    parameters,
    mutating: false,
    toolsets: ['coding' as const],
    runsIn: 'gateway' as const,
    // Not applied: the sub-run's own limits bound it (see drivesSubRun).
    timeoutSeconds: 900,
    drivesSubRun: true,
  };

  constructor(
    private readonly subRuns: SubRuns,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
  ) {}

  /** RUNBOX_DELEGATE_MAX_DEPTH=0 turns sub-runs off on the whole deployment. */
  unavailableReason(): string | undefined {
    return this.config.RUNBOX_DELEGATE_MAX_DEPTH === 0 ? depthLimitReason(0, 0) : undefined;
  }

  execute(ctx: GatewayToolContext, args: DelegateArgs): Promise<GatewayToolResult> {
    return this.subRuns.delegate(ctx, args);
  }
}
