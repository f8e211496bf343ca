/** One thing the executor needs to take work, checked with a bound on how long it may take. */
export interface ReadinessCheck {
  name: string;
  /** True when it answers; false or a throw when it does not. */
  probe(): Promise<boolean>;
}

export interface Readiness {
  ready: boolean;
  checks: Record<string, 'ok' | 'down'>;
  /** One line per check that failed, naming it and why. */
  reasons: string[];
}

/** Each check gets this long; a probe never waits on an engine or a server that hangs. */
const CHECK_TIMEOUT_MS = 2_000;

/** Runs the checks side by side, each bounded in time, and says which failed and why. */
export async function checkReadiness(checks: readonly ReadinessCheck[], timeoutMs = CHECK_TIMEOUT_MS): Promise<Readiness> {
  const results = await Promise.all(checks.map(async (check) => ({ name: check.name, failure: await failureOf(check, timeoutMs) })));
  const reasons = results.filter((r) => r.failure !== null).map((r) => `${r.name}: ${r.failure}`);
  return {
    ready: reasons.length === 0,
    checks: Object.fromEntries(results.map((r) => [r.name, r.failure === null ? 'ok' : 'down'])),
    reasons,
  };
}

async function failureOf(check: ReadinessCheck, timeoutMs: number): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs);
  });
  try {
    return await Promise.race([
      check.probe().then(
        (ok) => (ok ? null : 'not answering'),
        (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 200),
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
