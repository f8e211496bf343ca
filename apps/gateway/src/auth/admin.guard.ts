import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { AppError, ErrorCode } from '@app/errors';
import type { Request } from 'express';
import { createHash, timingSafeEqual } from 'node:crypto';
import { ChecksQueryAfterAuthenticating, rejectUndeclaredQuery } from '../common/validation/undeclared-query.guard';
import { bearerToken } from './auth.service';

/** /v1/admin routes: the bearer token must equal RUNBOX_ADMIN_TOKEN. Without one, they are off. */
@Injectable()
@ChecksQueryAfterAuthenticating()
export class AdminGuard implements CanActivate {
  private readonly expected?: Buffer;

  constructor(@Inject(RUNBOX_CONFIG) config: RunboxConfig) {
    if (config.RUNBOX_ADMIN_TOKEN) this.expected = digest(config.RUNBOX_ADMIN_TOKEN);
  }

  canActivate(ctx: ExecutionContext): boolean {
    if (!this.expected) {
      throw new AppError(ErrorCode.Forbidden, 'the admin API is disabled: set RUNBOX_ADMIN_TOKEN to enable it');
    }
    const token = bearerToken(ctx.switchToHttp().getRequest<Request>().headers.authorization);
    // Comparing digests keeps the comparison constant-time whatever the token's length.
    if (token === undefined || !timingSafeEqual(digest(token), this.expected)) {
      throw new AppError(ErrorCode.Unauthorized, 'missing or invalid admin token');
    }
    // Only now: a request without the token is a 401 whatever its query holds.
    rejectUndeclaredQuery(ctx);
    return true;
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
