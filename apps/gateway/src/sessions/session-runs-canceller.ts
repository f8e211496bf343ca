/**
 * Ends the runs of a session being deleted. Runs build on sessions (a run belongs to one
 * and reads its history), so sessions cannot import the runs feature: SessionsService asks
 * for this, and the gateway module binds it to the runs feature's RunControlService.
 */
export abstract class SessionRunsCanceller {
  /** Cancels each run of the session that has not ended, and starts none queued behind them; returns how many. */
  abstract cancelSessionRuns(tenantId: string, sessionId: string): Promise<number>;
}
