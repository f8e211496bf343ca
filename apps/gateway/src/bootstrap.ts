import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RunboxConfig } from '@app/config';
import { LOGGER, PinoNestLogger } from '@app/logging';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { json } from 'express';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { HttpErrorFilter } from './common/http-error.filter';
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
  app.use(httpMetricsMiddleware(app.get(MetricsService)));
  const errors = new HttpErrorFilter(logger);
  app.useGlobalFilters(errors);
  // Our own JSON parser, so a malformed or oversized body is answered by the same filter
  // (400 invalid_json, 413) rather than by the framework's generic error.
  app.use(json({ limit: config.RUNBOX_MAX_BODY_BYTES, strict: false }));
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => (err ? errors.reply(err, res) : next()));
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.enableShutdownHooks();
  return app;
}
