import { CanActivate, ExecutionContext, Injectable, UseGuards } from '@nestjs/common';
import { AppError } from '@app/errors';
import { ChecksQueryAfterAuthenticating, UndeclaredQueryGuard } from './undeclared-query.guard';

@Injectable()
@ChecksQueryAfterAuthenticating()
class CheckingGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

@Injectable()
class OtherGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

class Routes {
  @UseGuards(CheckingGuard)
  authenticated(): void {}

  @UseGuards(OtherGuard)
  otherwiseGuarded(): void {}

  open(): void {}
}

function context(handler: keyof Routes, query: Record<string, unknown>): ExecutionContext {
  return {
    getType: () => 'http',
    getClass: () => Routes,
    getHandler: () => Routes.prototype[handler],
    switchToHttp: () => ({ getRequest: () => ({ query }) }),
  } as unknown as ExecutionContext;
}

describe('UndeclaredQueryGuard', () => {
  const guard = new UndeclaredQueryGuard();

  it('refuses a query on a route that declares none and has no guard of its own', () => {
    expect(() => guard.canActivate(context('open', { x: '1' }))).toThrow(AppError);
    expect(guard.canActivate(context('open', {}))).toBe(true);
  });

  it('leaves the check to a guard marked as applying it after authenticating', () => {
    expect(guard.canActivate(context('authenticated', { x: '1' }))).toBe(true);
  });

  it('still checks a route whose guards do not apply the rule themselves', () => {
    expect(() => guard.canActivate(context('otherwiseGuarded', { x: '1' }))).toThrow(AppError);
  });
});
