import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from './metrics.service';

/**
 * Counts every answered request by its route pattern (`/v1/runs/:id`), never by the raw
 * path, so ids do not explode the label set. Unmatched paths count as `unmatched`.
 */
export function httpMetricsMiddleware(metrics: MetricsService) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      const method = req.method;
      metrics.httpRequests.inc({ method, route, status: String(res.statusCode) });
      end({ method, route });
    });
    next();
  };
}
