import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { ConnectionError, RateLimitError, Runbox, ServiceUnavailableError } from '@runbox/sdk';

type Reply = (req: IncomingMessage, res: ServerResponse) => void;

/** A loopback HTTP server answering from a list of replies, recording when each request came. */
class ScriptedApi {
  readonly seen: Array<{ method: string; url: string; at: number; headers: IncomingMessage['headers'] }> = [];
  private server?: Server;
  private replies: Reply[] = [];

  answer(...replies: Reply[]): void {
    this.replies = replies;
    this.seen.length = 0;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.seen.push({ method: req.method ?? '', url: req.url ?? '', at: Date.now(), headers: req.headers });
      req.resume();
      const reply = this.replies.shift() ?? ((_q, s) => s.writeHead(500).end('script exhausted'));
      reply(req, res);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => (_req, res) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
};
const rateLimited = (retryAfter: string): Reply => json(429, { error: { code: 'rate_limited', message: 'slow down' } }, { 'retry-after': retryAfter });
/** The connection closes with no answer at all. */
const hangUp: Reply = (req) => req.socket.destroy();
const run = { id: 'run_1', session_id: 'ses_1', status: 'queued', created_at: '2026-01-01T00:00:00Z' };

describe('SDK retries', () => {
  const api = new ScriptedApi();
  let rb: Runbox;

  beforeAll(async () => {
    rb = new Runbox({ apiKey: 'rbx_test', baseUrl: await api.start(), retryDelayMs: { base: 20, max: 50 } });
  });

  afterAll(() => api.stop());

  it('tries a 429 again after its Retry-After, even a POST without an idempotency key', async () => {
    api.answer(rateLimited('1'), json(202, run));
    expect(await rb.runs.create({ input: 'x' })).toEqual(run);
    expect(api.seen).toHaveLength(2);
    // The second try waited at least the second the server asked for (backoff alone would be ≤ 50 ms).
    expect(api.seen[1].at - api.seen[0].at).toBeGreaterThanOrEqual(1000);
  });

  it('gives up after maxRetries with a RateLimitError carrying code, status and Retry-After', async () => {
    api.answer(rateLimited('0'), rateLimited('0'), rateLimited('0'));
    const error = await rb.runs.get('run_1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429, code: 'rate_limited', message: 'slow down', retryAfterSeconds: 0 });
    expect(api.seen).toHaveLength(3);
  });

  it('does not wait out a Retry-After longer than a minute', async () => {
    api.answer(rateLimited('3600'), json(200, run));
    await expect(rb.runs.get('run_1')).rejects.toBeInstanceOf(RateLimitError);
    expect(api.seen).toHaveLength(1);
  });

  it('tries a GET again after a dropped connection or a 503', async () => {
    api.answer(hangUp, json(503, { error: { code: 'service_unavailable', message: 'busy' } }), json(200, run));
    expect(await rb.runs.get('run_1')).toEqual(run);
    expect(api.seen.map((s) => s.method)).toEqual(['GET', 'GET', 'GET']);
  });

  it('never sends a POST without an idempotency key twice after a dropped connection or a 503', async () => {
    api.answer(hangUp, json(202, run));
    await expect(rb.runs.create({ input: 'x' })).rejects.toBeInstanceOf(ConnectionError);
    expect(api.seen).toHaveLength(1);
    api.answer(json(503, { error: { code: 'service_unavailable', message: 'busy' } }), json(202, run));
    await expect(rb.runs.create({ input: 'x' })).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(api.seen).toHaveLength(1);
  });

  it('sends a POST with an idempotency key again, with the same key', async () => {
    api.answer(hangUp, json(202, run));
    expect(await rb.runs.create({ input: 'x' }, { idempotencyKey: 'k-1' })).toEqual(run);
    expect(api.seen.map((s) => s.headers['idempotency-key'])).toEqual(['k-1', 'k-1']);
  });

  it('stops waiting for a retry as soon as the signal aborts', async () => {
    api.answer(rateLimited('30'), json(200, run));
    const controller = new AbortController();
    const pending = rb.runs.get('run_1', { signal: controller.signal });
    // Abort once the server has seen the first try (the SDK is then in its Retry-After wait).
    while (api.seen.length === 0) await new Promise((r) => setImmediate(r));
    controller.abort(new Error('user gave up'));
    await expect(pending).rejects.toThrow('user gave up');
    expect(api.seen).toHaveLength(1);
  });
});
