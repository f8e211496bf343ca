import { Injectable } from '@nestjs/common';

/** Lets go of what a feature holds for one session; it must not throw for a session it knows nothing of. */
export type SessionReleaseHook = (tenantId: string, sessionId: string) => Promise<void>;

/**
 * What features built on sessions hold per session (e.g. MCP connections to processes in its
 * sandbox) and let go of when it is deleted. Sessions cannot import those features, so they
 * register here, and SessionsService.delete runs every hook before the sandbox is released.
 */
@Injectable()
export class SessionReleaseHooks {
  private readonly hooks: SessionReleaseHook[] = [];

  register(hook: SessionReleaseHook): void {
    this.hooks.push(hook);
  }

  /** Runs every hook, all at once; returns the errors of those that failed (one failing never stops the others). */
  async run(tenantId: string, sessionId: string): Promise<unknown[]> {
    const settled = await Promise.allSettled(this.hooks.map((hook) => hook(tenantId, sessionId)));
    return settled.flatMap((s) => (s.status === 'rejected' ? [s.reason] : []));
  }
}
