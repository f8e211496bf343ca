import { isNatsUnavailable } from '@app/messaging';
import { isDatabaseUnavailable } from '@app/persistence';
import type { Logger } from 'pino';
import type { TenantTool } from '../tools/tenant-tool';
import type { ToolDefinition } from '../tools/tool-definition';
import type { ToolRegistry } from '../tools/tool-registry';
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
  /** Tools its selection named that it may not use here, with the reason (delegation depth). */
  withheld: ReadonlyMap<string, string>;
  /** The offered tools the run's tenant added (MCP, OpenAPI), listed again before each model turn. */
  tenantTools: ReadonlyMap<string, TenantTool>;
  /** Tool source problems already reported on this run (each once, not at every turn). */
  reportedProblems: Set<string>;
  limits: EffectiveLimits;
  /** Tools the tenant's operator marked as needing approval (read when a worker takes the run up). */
  approvalRequired?: ReadonlySet<string>;
  /** The executor holding the session's sandbox, once it has one. */
  executorId: string | null;
  usage: RunUsage;
  log: Logger;
  /**
   * Renews this worker's claim on the run: false (and the run's signal aborted) when another
   * worker has taken it over. Asked before a write that had to wait for the database, so a
   * worker that lost the run meanwhile writes nothing. Absent outside a run worker.
   */
  holdClaim?: () => Promise<boolean>;
}

/** A tool the run can name: built in, or added by its tenant. */
export function runToolDefinition(registry: ToolRegistry, ctx: Pick<RunContext, 'tenantTools'>, name: string): ToolDefinition | undefined {
  return registry.get(name) ?? ctx.tenantTools.get(name)?.definition;
}

export function usageFrom(stored: Record<string, unknown> | null): RunUsage {
  const n = (k: string) => (typeof stored?.[k] === 'number' ? (stored[k] as number) : 0);
  return { input_tokens: n('input_tokens'), output_tokens: n('output_tokens'), model_calls: n('model_calls'), tool_calls: n('tool_calls') };
}

/** The run's wall time so far: from its start (null while queued) to `now`. */
export function wallMs(startedAt: Date | null, now: Date): number {
  return startedAt ? Math.max(0, now.getTime() - startedAt.getTime()) : 0;
}

/**
 * Postgres or NATS being briefly unreachable is no reason to fail a run: the worker waits
 * for them and continues from the stored state. Anything else unexpected fails the run, so
 * a bug cannot keep it running forever.
 */
export function isTransientInfrastructureError(err: unknown): boolean {
  return isDatabaseUnavailable(err) || isNatsUnavailable(err);
}
