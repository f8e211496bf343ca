import type { CDPSession, Page } from 'playwright-core';

/** Characters of a script's JSON result kept; the rest is dropped in the page. */
export const SCRIPT_RESULT_MAX_CHARS = 1_000_000;

export interface ScriptResult {
  /** The result as JSON (`undefined` when there is none), at most SCRIPT_RESULT_MAX_CHARS. */
  json: string;
  /** The length of the whole JSON, before the cut. */
  totalChars: number;
}

/** The script ran past its time and was stopped. */
export class ScriptTimeoutError extends Error {}

/**
 * Runs the model's script in the page (an expression, or a function, which is called; a
 * promise is awaited) and returns its result as JSON, cut in the page so a huge value never
 * crosses to the gateway. A script still running at `timeoutMs` is terminated inside V8
 * (Runtime.terminateExecution), so the tab stays usable after an endless loop.
 */
export async function runPageScript(page: Page, expression: string, timeoutMs: number): Promise<ScriptResult> {
  const deadline = Date.now() + timeoutMs;
  // Attached before the script starts: a DevTools session attached while the page's thread
  // is busy is never set up, so it could not stop the script.
  const cdp = await page.context().newCDPSession(page);
  try {
    const evaluated = await beforeDeadline(cdp, page.evaluateHandle(expression), deadline);
    // An expression that is a function is called (Playwright calls only functions it is given as functions).
    const handle = await beforeDeadline(cdp, evaluated.evaluateHandle(callIfFunction), deadline).finally(() => evaluated.dispose().catch(() => undefined));
    try {
      return bounded(await beforeDeadline(cdp, handle.evaluate(toBoundedJson, SCRIPT_RESULT_MAX_CHARS), deadline));
    } finally {
      await handle.dispose().catch(() => undefined);
    }
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

/** The page may have replaced JSON.stringify or String.prototype.slice: its answer is checked again here. */
function bounded(out: { json: unknown; total: unknown } | undefined): ScriptResult {
  const json = typeof out?.json === 'string' ? out.json.slice(0, SCRIPT_RESULT_MAX_CHARS) : 'undefined';
  const totalChars = typeof out?.total === 'number' && Number.isFinite(out.total) ? Math.max(out.total, json.length) : json.length;
  return { json, totalChars };
}

async function beforeDeadline<T>(cdp: CDPSession, work: Promise<T>, deadline: number): Promise<T> {
  // Settled later (the page navigated, the context closed): nobody waits for it any more.
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ScriptTimeoutError()), Math.max(deadline - Date.now(), 0));
  });
  try {
    return await Promise.race([work, expired]);
  } catch (err) {
    if (err instanceof ScriptTimeoutError) await cdp.send('Runtime.terminateExecution').catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** Runs in the page: a function's result (a promise is awaited by Playwright), else the value. */
function callIfFunction(value: unknown): unknown {
  return typeof value === 'function' ? (value as () => unknown)() : value;
}

/**
 * Runs in the page: the value as indented JSON, with BigInts as strings and cycles marked,
 * cut at `max` characters. Self-contained, since Playwright sends its source to the page.
 */
function toBoundedJson(value: unknown, max: number): { json: string; total: number } {
  const ancestors: unknown[] = [];
  let json: string | undefined;
  try {
    json = JSON.stringify(
      value,
      function (this: unknown, _key: string, v: unknown) {
        if (typeof v === 'bigint') return v.toString();
        if (typeof v !== 'object' || v === null) return v;
        while (ancestors.length > 0 && ancestors[ancestors.length - 1] !== this) ancestors.pop();
        if (ancestors.includes(v)) return '[Circular]';
        ancestors.push(v);
        return v;
      },
      2,
    );
  } catch (err) {
    json = JSON.stringify(`[not serialisable: ${String(err)}]`);
  }
  if (json === undefined) return { json: 'undefined', total: 9 };
  return { json: json.length > max ? json.slice(0, max) : json, total: json.length };
}
