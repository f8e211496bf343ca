import type { NextFunction, Request, Response } from 'express';

/**
 * A path segment whose percent-encoding does not decode (`%FF`, or `%ED%A0%80`, the bytes
 * of a lone surrogate) is taken literally, `%` and all. The router would otherwise fail the
 * whole request before any route ran; this way such a segment names nothing, and the route
 * answers it as it answers any other unknown id (404, not echoed).
 */
export function takeUndecodablePathSegmentsLiterally(req: Request, _res: Response, next: NextFunction): void {
  const queryAt = req.url.indexOf('?');
  const path = queryAt < 0 ? req.url : req.url.slice(0, queryAt);
  if (path.includes('%')) {
    const literal = path
      .split('/')
      .map((segment) => (decodes(segment) ? segment : segment.replace(/%/g, '%25')))
      .join('/');
    if (literal !== path) req.url = literal + (queryAt < 0 ? '' : req.url.slice(queryAt));
  }
  next();
}

function decodes(segment: string): boolean {
  try {
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}
