import { ZodType } from 'zod';

export type ToolsetName = 'minimal' | 'coding' | 'research' | 'browser';

/**
 * A tool as the gateway knows it. `description` is prompt text: it is how the model decides
 * whether to reach for the tool, so it says what the tool does, when to use it, and which
 * tool to prefer instead when there is one.
 */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: ZodType<Record<string, unknown>>;
  /** Approval modes ask about (prompt) or refuse (deny) mutating tools. */
  mutating: boolean;
  /**
   * For tools whose actions differ (skill: write mutates, list and read do not): decides per
   * call, from the parsed arguments. Without it, `mutating` holds for every call.
   */
  mutatingCall?: (args: Record<string, unknown>) => boolean;
  toolsets: ToolsetName[];
  /** `sandbox` tools go to the executor; `gateway` tools run in the gateway. */
  runsIn: 'sandbox' | 'gateway';
  /** The file path argument, for tools whose calls on one file must run in order. */
  pathArgument?: string;
  /** Default time limit in seconds (limits.timeouts overrides per run). */
  timeoutSeconds: number;
  /**
   * The call drives a sub-run (delegate_task) whose state is durable on its own: the run
   * loop puts no watchdog on it (the sub-run's own limits bound it), and a call found
   * running after its worker stopped is taken up again, continuing the same sub-run,
   * instead of being reported interrupted.
   */
  drivesSubRun?: boolean;
}
