/** What `runbox` exits with; `run` (and `runs wait`) report how the run ended. */
export const EXIT = {
  ok: 0,
  /** The run failed, or the command itself did (bad arguments, an API error). */
  failed: 1,
  cancelled: 2,
  /** The run waits for an approval and no terminal was there to ask. */
  needsApproval: 3,
} as const;
