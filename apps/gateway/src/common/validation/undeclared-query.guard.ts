import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { GUARDS_METADATA } from '@nestjs/common/constants';
import type { Request } from 'express';
import { z } from 'zod';
import { routeParts } from './route-catalogue';
import { ZodValidationPipe } from './zod-validation.pipe';

const noQuery = new ZodValidationPipe(z.object({}).strict(), 'query');
/** Per handler: whether it declares a query schema. */
const declaresQuery = new WeakMap<object, boolean>();
/** Guard classes that call rejectUndeclaredQuery themselves once they have authenticated. */
const checkingGuards = new WeakSet<object>();

/**
 * Marks an authenticating guard that applies the undeclared-query rule itself, after
 * authenticating: UndeclaredQueryGuard then leaves its routes to it. A route whose guards
 * are not marked is checked by UndeclaredQueryGuard, so a new guard cannot drop the rule.
 */
export function ChecksQueryAfterAuthenticating(): ClassDecorator {
  return (guard) => {
    checkingGuards.add(guard);
  };
}

/**
 * A route that declares no query schema takes no query: an unknown parameter is a 400 that
 * names it rather than being silently ignored. Authenticating guards call this once they
 * have authenticated; UndeclaredQueryGuard calls it for every other route.
 */
export function rejectUndeclaredQuery(context: ExecutionContext): void {
  if (context.getType() !== 'http') return;
  const query = context.switchToHttp().getRequest<Request>().query as Record<string, unknown>;
  // No query at all, the usual case, needs no look at the route.
  if (!hasAnyKey(query)) return;
  const handler = context.getHandler();
  let declares = declaresQuery.get(handler);
  if (declares === undefined) {
    declares = routeParts(context.getClass(), handler.name).query !== undefined;
    declaresQuery.set(handler, declares);
  }
  if (!declares) noQuery.transform(query);
}

function hasAnyKey(value: object): boolean {
  for (const key in value) if (Object.hasOwn(value, key)) return true;
  return false;
}

/**
 * Applies the undeclared-query rule to every route, a new one included, as a global guard.
 * On a route with an authenticating guard marked ChecksQueryAfterAuthenticating the rule is
 * that guard's to apply once it has authenticated, so a request without credentials is a
 * 401 whatever its query holds; on any other route (probes, metrics, the API document) it
 * is applied here. A
 * guard rather than an interceptor: Nest wraps every request a global interceptor sees in
 * observables, a cost on every call for a check that is almost always a no-op.
 */
@Injectable()
export class UndeclaredQueryGuard implements CanActivate {
  private readonly guarded = new WeakMap<object, boolean>();

  canActivate(context: ExecutionContext): boolean {
    if (!this.hasCheckingGuard(context)) rejectUndeclaredQuery(context);
    return true;
  }

  private hasCheckingGuard(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    let guarded = this.guarded.get(handler);
    if (guarded === undefined) {
      const declared = [Reflect.getMetadata(GUARDS_METADATA, context.getClass()), Reflect.getMetadata(GUARDS_METADATA, handler)] as unknown[];
      guarded = declared.some((guards) => Array.isArray(guards) && guards.some((guard) => typeof guard === 'function' && checkingGuards.has(guard)));
      this.guarded.set(handler, guarded);
    }
    return guarded;
  }
}
