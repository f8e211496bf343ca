import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { configSecrets, RunboxConfig } from '@app/config';
import { AppError, ErrorCode } from '@app/errors';
import { LOGGER, PinoNestLogger } from '@app/logging';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { json } from 'express';
import type { NextFunction, Request, Response } from 'express';
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { HttpErrorFilter } from './common/http-error.filter';
import { checkJsonLimits } from './common/json-limits';
import { assignRequestId, enterRequestContext } from './common/request-id';
import { takeUndecodablePathSegmentsLiterally } from './common/undecodable-path';
import { UndeclaredQueryGuard } from './common/validation/undeclared-query.guard';
import { GatewayModule } from './gateway.module';
import { httpMetricsMiddleware } from './metrics/http-metrics.middleware';
import { MetricsService } from './metrics/metrics.service';

/**
 * Builds the HTTP app exactly as production runs it; main.ts and the end-to-end tests both
 * call this, so the tests exercise the real body limits, error filter and shutdown hooks.
 */
export async function createGateway(config: RunboxConfig): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(GatewayModule.forRoot(config), {
    bodyParser: false,
    bufferLogs: true,
  });
  const logger = app.get<Logger>(LOGGER);
  app.useLogger(new PinoNestLogger(logger));
  app.use(assignRequestId);
  app.use(httpMetricsMiddleware(app.get(MetricsService)));
  const errors = new HttpErrorFilter(logger, configSecrets(config));
  app.useGlobalFilters(errors);
  app.useGlobalGuards(new UndeclaredQueryGuard());
  const limits = { maxDepth: config.RUNBOX_MAX_JSON_DEPTH, maxStringChars: config.RUNBOX_MAX_JSON_STRING_CHARS };
  app.use(takeUndecodablePathSegmentsLiterally);
  app.use(unlessRawBody(requireJsonBody));
  // Our own JSON parser, so a malformed, oversized or over-deep body is answered by the same
  // filter (400 invalid_json, 413, 400 naming the limit) rather than by the framework's.
  app.use(unlessRawBody(json({ limit: config.RUNBOX_MAX_BODY_BYTES, strict: false, type: JSON_TYPES, verify: (_req, _res, buf) => checkJsonLimits(buf, limits) })));
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => (err ? errors.reply(err, res) : next()));
  app.use(enterRequestContext);
  answerUnparseableRequestsWithJson(app.getHttpServer() as Server);
  outlastClientsOnIdleConnections(app.getHttpServer() as Server);
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.enableShutdownHooks();
  return app;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * Keeps an idle keep-alive connection open longer than clients and load balancers do (they
 * commonly drop theirs after 60 s): with Node's default of 5 s, a client could send its next
 * request on a connection the gateway was closing at that moment, and get a reset for a
 * request that never arrived. Closing on shutdown is unaffected (idle connections close then).
 */
function outlastClientsOnIdleConnections(server: Server): void {
  server.keepAliveTimeout = 65_000;
  // Node wants the headers timeout above the keep-alive one.
  server.headersTimeout = 66_000;
}

/**
 * Uploads of workspace files (PUT /v1/sessions/{id}/files/..., POST /v1/sessions/{id}/archive)
 * carry raw bytes of any type, streamed by their controller with its own size cap.
 */
function isRawBodyRoute(req: Request): boolean {
  if (req.method === 'PUT') return /^\/v1\/sessions\/[^/]+\/files\/./.test(req.path);
  if (req.method === 'POST') return /^\/v1\/sessions\/[^/]+\/archive\/?$/.test(req.path);
  return false;
}

function unlessRawBody(middleware: (req: Request, res: Response, next: NextFunction) => void) {
  return (req: Request, res: Response, next: NextFunction) => (isRawBodyRoute(req) ? next() : middleware(req, res, next));
}

/** A body that is not JSON is refused (415) rather than silently ignored. */
function requireJsonBody(req: Request, _res: Response, next: NextFunction): void {
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (hasBody && !req.is(JSON_TYPES)) {
    next(new AppError(ErrorCode.UnsupportedMediaType, 'the request body must be JSON (Content-Type: application/json)'));
    return;
  }
  next();
}

/**
 * Requests Node's HTTP parser rejects (oversized headers, malformed request lines) never
 * reach Express; Node would answer them with a bare status line. Answer with the same JSON
 * error shape as everything else.
 */
function answerUnparseableRequestsWithJson(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request';
    const error = tooLarge
      ? { code: ErrorCode.PayloadTooLarge, message: 'the request headers are too large' }
      : { code: ErrorCode.ValidationFailed, message: 'the request could not be parsed as HTTP' };
    const body = JSON.stringify({ error });
    socket.end(`HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
}
