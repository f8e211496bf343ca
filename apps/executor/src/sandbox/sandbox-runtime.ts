import type { AgentChannel } from './agent-channel';

export type SandboxBackend = 'docker' | 'local';

/**
 * Where a session's sandbox is. For Docker: the container and its workspace volume. For
 * the local backend: no container, and the session's directory on the executor host.
 */
export interface SandboxRef {
  containerId: string | null;
  volume: string | null;
}

/** A sandbox a runtime has just made, possibly with its channel already open. */
export interface ProvisionedSandbox extends SandboxRef {
  channel?: AgentChannel;
}

/** What the orphan sweep must leave alone: everything a live session still owns. */
export interface WantedResources {
  containers: Set<string>;
  volumes: Set<string>;
  /** Sessions with a lifecycle step in progress; their resources may not be recorded yet. */
  busySessions: Set<string>;
}

/**
 * One way of running the sandbox agent for a session. SandboxService owns the sessions,
 * their records and their lifecycle; a runtime only makes, reaches and destroys sandboxes.
 */
export interface SandboxRuntime {
  readonly backend: SandboxBackend;
  /**
   * Starts background work (filling the warm pool). `room`: how many more sandboxes the
   * executor may hold right now; background work never makes more than that.
   */
  start(room: () => number): void;
  /** A ready sandbox out of the warm pool for a new session, or undefined when none waits. */
  takeWarm(): ProvisionedSandbox | undefined;
  /** Puts back a warm sandbox taken for a session that turned out to need another one. */
  returnWarm(sandbox: ProvisionedSandbox): void;
  /** A new sandbox for the session, on `workspace` when an earlier one's was kept. */
  provision(tenantId: string, sessionId: string, workspace: string | null): Promise<ProvisionedSandbox>;
  isAlive(ref: SandboxRef): Promise<boolean>;
  /** Opens a channel to the agent and waits until it is ready. */
  connect(ref: SandboxRef, timeoutMs: number): Promise<AgentChannel>;
  /** Removes the sandbox; its workspace too unless `keepWorkspace`. */
  destroy(ref: SandboxRef, keepWorkspace: boolean): Promise<void>;
  /** Removes what this runtime owns and `wanted` (asked after listing) does not name; returns how many went. */
  sweep(wanted: () => Promise<WantedResources>): Promise<number>;
  /** Stops background work (the warm pool); sessions' sandboxes stay. */
  close(): Promise<void>;
}
