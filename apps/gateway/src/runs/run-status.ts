/** Where a run is in its life: queued → running (⇄ requires_approval) → one of the terminal three. */
export type RunStatus = 'queued' | 'running' | 'requires_approval' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
export const ACTIVE_STATUSES: readonly RunStatus[] = ['queued', 'running', 'requires_approval'];

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}
