import type { Logger } from 'pino';
import { EffectiveLimits } from './run-options';
import { RunView } from './runs.repository';

/** Ends a run as failed with a message the client can read. */
export class RunFailure extends Error {}

export interface RunUsage {
  input_tokens: number;
  output_tokens: number;
  model_calls: number;
  tool_calls: number;
}

/** What one worker knows about the run it is executing. */
export interface RunContext {
  run: RunView;
  signal: AbortSignal;
  /** The tools this run may call (toolset, enabled/disabled, allowlist). */
  offered: Set<string>;
  limits: EffectiveLimits;
  /** The executor holding the session's sandbox, once it has one. */
  executorId: string | null;
  usage: RunUsage;
  log: Logger;
}

export function usageFrom(stored: Record<string, unknown> | null): RunUsage {
  const n = (k: string) => (typeof stored?.[k] === 'number' ? (stored[k] as number) : 0);
  return { input_tokens: n('input_tokens'), output_tokens: n('output_tokens'), model_calls: n('model_calls'), tool_calls: n('tool_calls') };
}
