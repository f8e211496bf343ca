import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Request } from 'express';

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

/** The id of the API key the request authenticated with (set by ApiKeyGuard). */
export const ApiKeyId = createParamDecorator((_data: unknown, ctx: ExecutionContext): string => {
  const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
  if (!req.apiKeyId) throw new Error('ApiKeyId used on a route without ApiKeyGuard');
  return req.apiKeyId;
});
