import { acceptRequestId, newRequestId, REQUEST_ID_HEADER, withRequestId } from '@app/logging';
import type { NextFunction, Request, Response } from 'express';

export interface CorrelatedRequest extends Request {
  requestId?: string;
}

/**
 * Gives every request its correlation id: the client's X-Request-Id when it is well formed
 * (at most 128 characters of letters, digits and `._:+/=-`), otherwise a new UUID, so a
 * bad id never fails a request and never reaches a log line. The id is answered in the
 * response's X-Request-Id, before anything else can answer.
 */
export function assignRequestId(req: CorrelatedRequest, res: Response, next: NextFunction): void {
  const requestId = acceptRequestId(req.headers[REQUEST_ID_HEADER.toLowerCase()]) ?? newRequestId();
  req.requestId = requestId;
  res.setHeader(REQUEST_ID_HEADER, requestId);
  next();
}

/**
 * Makes the request's id the current one for the rest of its handling: log lines carry it
 * and NATS requests pass it on. Installed after the body parser, because a body read from
 * the socket resumes in the socket's async context, not the request's.
 */
export function enterRequestContext(req: CorrelatedRequest, _res: Response, next: NextFunction): void {
  withRequestId(req.requestId, next);
}
