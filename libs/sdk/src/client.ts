import { RunboxError } from './errors';
import { DEFAULT_RETRY_POLICY, RetryPolicy } from './retry';
import { Runs } from './runs';
import { Sessions } from './sessions';
import { RequestOptions, Transport } from './transport';
import { ToolInfo } from './types';

export interface RunboxOptions {
  /** An API key (`rbx_...`); default: the RUNBOX_API_KEY environment variable. */
  apiKey?: string;
  /** The gateway's address, e.g. http://localhost:8080; default: RUNBOX_BASE_URL, then http://localhost:8080. */
  baseUrl?: string;
  /** Retries of a call that may be retried (see the README); default 2. */
  maxRetries?: number;
  /** Backoff tuning: the first wait and the longest one, in milliseconds. */
  retryDelayMs?: { base?: number; max?: number };
  /** A fetch to use instead of the global one (a proxy agent, tests). */
  fetch?: typeof fetch;
}

export const DEFAULT_BASE_URL = 'http://localhost:8080';

/** The Runbox API client. */
export class Runbox {
  readonly runs: Runs;
  readonly sessions: Sessions;
  readonly baseUrl: string;
  private readonly transport: Transport;

  constructor(options: RunboxOptions = {}) {
    const env = readEnv();
    const apiKey = options.apiKey ?? env.RUNBOX_API_KEY;
    if (!apiKey) throw new RunboxError('no API key: pass { apiKey } or set RUNBOX_API_KEY');
    this.baseUrl = (options.baseUrl ?? env.RUNBOX_BASE_URL ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    const retry: RetryPolicy = {
      maxRetries: options.maxRetries ?? DEFAULT_RETRY_POLICY.maxRetries,
      baseDelayMs: options.retryDelayMs?.base ?? DEFAULT_RETRY_POLICY.baseDelayMs,
      maxDelayMs: options.retryDelayMs?.max ?? DEFAULT_RETRY_POLICY.maxDelayMs,
    };
    this.transport = new Transport({ baseUrl: this.baseUrl, apiKey, retry, fetch: options.fetch ?? globalThis.fetch.bind(globalThis) });
    this.runs = new Runs(this.transport);
    this.sessions = new Sessions(this.transport);
  }

  /** The tools a run can use: the built-in catalogue and the tenant's own (MCP, OpenAPI). */
  async tools(options: RequestOptions = {}): Promise<ToolInfo[]> {
    const body = await this.transport.json<{ data: ToolInfo[] }>({ ...options, method: 'GET', path: '/v1/tools' });
    return body.data;
  }
}

/** The environment where there is one (Node, Deno, Bun); empty in a browser. */
function readEnv(): Record<string, string | undefined> {
  const processLike = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return processLike?.env ?? {};
}
