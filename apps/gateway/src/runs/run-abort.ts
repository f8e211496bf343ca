/**
 * Why a worker stops executing a run before it ends:
 * - `cancel`: the client cancelled it; the running tool is interrupted.
 * - `shutdown`: this gateway is stopping; the run is handed to another replica and a tool
 *   already running in a sandbox is left to finish there (its result is reported as unknown).
 * - `lease_lost`: this worker stalled and another one took the run over; it must write nothing more.
 */
export type RunAbortKind = 'cancel' | 'shutdown' | 'lease_lost';

export class RunAbort extends Error {
  constructor(readonly kind: RunAbortKind) {
    super(`run stopped: ${kind}`);
  }
}

export function abortKind(signal: AbortSignal): RunAbortKind | undefined {
  if (!signal.aborted) return undefined;
  return signal.reason instanceof RunAbort ? signal.reason.kind : 'cancel';
}

/** Settles with `work`, or rejects as soon as `signal` aborts (the work itself is not stopped). */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}

/** Waits `ms`, or rejects when `signal` aborts first. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return raceAbort(
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
    signal,
  ).finally(() => clearTimeout(timer));
}
