import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { ExecutorMetrics } from './executor-metrics';
import { checkReadiness, ReadinessCheck } from './readiness';

const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * The executor's own small HTTP server, for probes and scrapes only: GET /healthz (the
 * process is up), /readyz (it can take work: subscribed to its subjects, NATS and its
 * Docker engine answering; 503 naming what is not), /metrics (Prometheus text). Plain
 * node:http: the executor is a NATS microservice and needs no web framework for three
 * read-only routes. It listens from module init, so liveness answers while the executor
 * is still taking back its sandboxes; readiness waits for `markSubscribed()`.
 */
export class ExecutorHttpServer {
  private server?: Server;
  private opening?: Promise<void>;
  private subscribed = false;
  private readonly checks: ReadinessCheck[];

  constructor(
    private readonly port: number,
    private readonly metrics: ExecutorMetrics,
    dependencies: readonly ReadinessCheck[],
    private readonly logger: Logger,
  ) {
    const subscriptions: ReadinessCheck = {
      name: 'subscriptions',
      probe: () => (this.subscribed ? Promise.resolve(true) : Promise.reject(new Error('not subscribed to its subjects yet'))),
    };
    this.checks = [subscriptions, ...dependencies];
  }

  /**
   * Starts listening; a second call waits for the first. NestMicroservice.init() runs the
   * module init hooks twice (once as an application context, once registering its
   * modules), and a second server would be left listening when the first is closed.
   */
  listen(): Promise<void> {
    this.opening ??= this.open();
    return this.opening;
  }

  private async open(): Promise<void> {
    const server = createServer((req, res) => void this.answer(req, res));
    // Probes and scrapers send small requests and read small answers; nothing here waits long.
    server.requestTimeout = 10_000;
    server.headersTimeout = 5_000;
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '0.0.0.0', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.logger.info({ port: this.boundPort }, 'executor HTTP (healthz, readyz, metrics) listening');
  }

  /** The port it listens on (the configured one, or the one the system chose for 0). */
  get boundPort(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? this.port;
  }

  /** The executor's subscriptions are confirmed by the server: it can take calls. */
  markSubscribed(): void {
    this.subscribed = true;
  }

  async close(): Promise<void> {
    this.subscribed = false;
    await this.opening?.catch(() => undefined);
    const server = this.server;
    this.server = undefined;
    this.opening = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET, HEAD');
        return json(res, 405, { error: { code: 'method_not_allowed', message: `${req.method ?? 'this method'} is not allowed here; use GET` } });
      }
      if (path === '/healthz') return json(res, 200, { status: 'ok' });
      if (path === '/readyz') {
        const { ready, checks, reasons } = await checkReadiness(this.checks);
        if (ready) return json(res, 200, { status: 'ready', checks });
        return json(res, 503, { status: 'not_ready', checks, reasons, error: { code: 'service_unavailable', message: `not ready: ${reasons.join('; ')}` } });
      }
      if (path === '/metrics') {
        res.writeHead(200, { 'content-type': PROMETHEUS_TEXT });
        res.end(await this.metrics.text());
        return;
      }
      return json(res, 404, { error: { code: 'not_found', message: 'the executor serves GET /healthz, /readyz and /metrics' } });
    } catch (err) {
      this.logger.error({ err }, 'executor HTTP request failed');
      if (!res.headersSent) json(res, 500, { error: { code: 'internal_error', message: 'the executor could not answer this request' } });
      else res.destroy();
    }
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
