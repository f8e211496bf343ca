import type { RunboxConfig } from '@app/config';
import { ToolDefinition } from './tool-definition';

/** The limit of a tool that names none of its own. */
const DEFAULT_TIMEOUT_SECONDS = 120;

/**
 * How long one call of a tool may take, in seconds: the terminal's own `timeout_seconds`
 * when the model gave one, else the run's `limits.timeouts` entry for the tool, else the
 * tool's default. The run's entry is also a ceiling on what the model asks for. The
 * router gives the executor (or a gateway tool) this limit, and the run loop's watchdog
 * waits this long plus the executor's grace, so both read it from here.
 */
export function toolTimeLimitSeconds(name: string, tool: Pick<ToolDefinition, 'timeoutSeconds'> | undefined, args: unknown, overrides?: Record<string, number>): number {
  const asked = name === 'terminal' && isRecord(args) && typeof args.timeout_seconds === 'number' ? args.timeout_seconds : undefined;
  const ceiling = overrides?.[name];
  const wanted = asked ?? ceiling ?? tool?.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  return ceiling !== undefined ? Math.min(wanted, ceiling) : wanted;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * How long the gateway waits for an executor's answer to a sandbox call whose own limit is
 * `limitMs`: the sandbox's start (a cold container on a busy host; the executor answers
 * "not ready, nothing ran" once it has waited that long), then the limit, then the grace.
 * Without the start in it, a call that waited for its sandbox could run and still be
 * reported as never answered, its outcome unknown.
 */
export function toolCallWaitMs(config: Pick<RunboxConfig, 'RUNBOX_SANDBOX_START_TIMEOUT_SECONDS' | 'RUNBOX_EXECUTOR_GRACE_MS'>, limitMs: number): number {
  return config.RUNBOX_SANDBOX_START_TIMEOUT_SECONDS * 1000 + limitMs + config.RUNBOX_EXECUTOR_GRACE_MS;
}
