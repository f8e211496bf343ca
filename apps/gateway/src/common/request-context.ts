import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Request } from 'express';
import type { CorrelatedRequest } from './request-id';

export interface AuthenticatedRequest extends Request {
  tenantId?: string;
  apiKeyId?: string;
}

/** The tenant the request's API key belongs to (set by ApiKeyGuard). */
export const TenantId = createParamDecorator((_data: unknown, ctx: ExecutionContext): string => {
  const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
  if (!req.tenantId) throw new Error('TenantId used on a route without ApiKeyGuard');
  return req.tenantId;
});

/** The request's correlation id (X-Request-Id, checked or made by assignRequestId). */
export const RequestId = createParamDecorator((_data: unknown, ctx: ExecutionContext): string | undefined => {
  return ctx.switchToHttp().getRequest<CorrelatedRequest>().requestId;
});

/** The id of the API key the request authenticated with (set by ApiKeyGuard). */
export const ApiKeyId = createParamDecorator((_data: unknown, ctx: ExecutionContext): string => {
  const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
  if (!req.apiKeyId) throw new Error('ApiKeyId used on a route without ApiKeyGuard');
  return req.apiKeyId;
});
