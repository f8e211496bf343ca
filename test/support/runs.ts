import { queryDatabase } from '@app/testing';
import { TestStack } from './test-stack';

/** Small helpers the run tests share; `baseUrl` points them at another gateway replica. */
export class RunsClient {
  constructor(
    readonly stack: TestStack,
    readonly key: string,
    readonly baseUrl?: string,
  ) {}

  private request(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}) {
    return this.stack.request(method, path, { key: this.key, baseUrl: this.baseUrl, ...options });
  }

  async create(body: Record<string, unknown>, headers: Record<string, string> = {}) {
    return this.request('POST', '/v1/runs', { body, headers });
  }

  /** Creates a run and insists on 202. */
  async start(body: Record<string, unknown>): Promise<{ id: string; session_id: string }> {
    const res = await this.create(body);
    if (res.status !== 202) throw new Error(`POST /v1/runs answered ${res.status}: ${res.text}`);
    return res.body;
  }

  get(runId: string) {
    return this.request('GET', `/v1/runs/${runId}`);
  }

  /** Polls the run until it reaches one of `statuses` (bounded). */
  async wait(runId: string, statuses = ['completed', 'failed', 'cancelled'], timeoutMs = 60_000) {
    return eventually(
      `run ${runId} to reach ${statuses.join(' or ')}`,
      async () => {
        const res = await this.get(runId).catch(() => undefined);
        return statuses.includes(res?.body?.status) ? res!.body : undefined;
      },
      timeoutMs,
    );
  }

  cancel(runId: string) {
    return this.request('POST', `/v1/runs/${runId}/cancel`);
  }

  decide(runId: string, body: Record<string, unknown>) {
    return this.request('POST', `/v1/runs/${runId}/approvals`, { body });
  }

  async messages(sessionId: string): Promise<Array<{ role: string; content: string | null; tool_call_id?: string; tool_calls?: any[] }>> {
    const res = await this.request('GET', `/v1/sessions/${sessionId}/messages`);
    if (res.status !== 200) throw new Error(`messages answered ${res.status}`);
    return res.body.data;
  }

  /** The tool result the model got for one call. */
  async toolResult(sessionId: string, callId: string): Promise<string> {
    const found = (await this.messages(sessionId)).find((m) => m.role === 'tool' && m.tool_call_id === callId);
    if (!found) throw new Error(`no tool result for ${callId}`);
    return found.content ?? '';
  }

  /** Runs a tool directly in the session's sandbox (no model), e.g. to look at a file. */
  async tool(sessionId: string, name: string, args: Record<string, unknown>) {
    const res = await this.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { body: { arguments: args } });
    if (res.status !== 200) throw new Error(`direct ${name} answered ${res.status}: ${res.text}`);
    return res.body as { output: string; metadata: Record<string, unknown>; is_error: boolean };
  }

  /** The run's tool calls as stored (status, decision), oldest first. */
  toolCallRows(runId: string) {
    return queryDatabase<{ call_id: string; name: string; status: string; decision: string | null; seq: number; output: string | null }>(
      this.stack.db.url,
      'SELECT call_id, name, status, decision, seq, output FROM tool_calls WHERE run_id = $1 ORDER BY seq',
      [runId],
    );
  }
}

/** Polls `check` until it returns a value (not undefined), within a generous deadline. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A promise the test resolves later: hold a scripted model answer until the test says go. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
