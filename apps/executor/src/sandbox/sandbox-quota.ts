import { parseStoredLimits } from '@app/contracts';

/** The tenant already has as many live sandboxes as its max_sandboxes limit allows. */
export class SandboxQuotaError extends Error {
  constructor(readonly max: number) {
    super(`tenant limit max_sandboxes (${max}) reached: delete a session (or let an idle sandbox be reaped) to start another`);
  }
}

/** Sandboxes in these states hold a container (or are about to). */
export const LIVE_SANDBOX_STATES = ['creating', 'ready'];

/** The tenant's max_sandboxes from its stored limits; undefined when it has none. */
export function maxSandboxes(limits: unknown): number | undefined {
  return parseStoredLimits(limits).max_sandboxes;
}
