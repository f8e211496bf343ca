import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { AuthenticatedRequest } from '../common/request-context';
import { ChecksQueryAfterAuthenticating, rejectUndeclaredQuery } from '../common/validation/undeclared-query.guard';
import { AuthService } from './auth.service';

@Injectable()
@ChecksQueryAfterAuthenticating()
export class ApiKeyGuard implements CanActivate {
  constructor(private readonly auth: AuthService) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
    const { tenantId, apiKeyId } = await this.auth.authenticate(req.headers.authorization);
    req.tenantId = tenantId;
    req.apiKeyId = apiKeyId;
    // Only now: a request without a valid key is a 401 whatever its query holds.
    rejectUndeclaredQuery(ctx);
    return true;
  }
}
