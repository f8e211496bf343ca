import { CallHandler, ExecutionContext, Injectable, NestInterceptor, Type } from '@nestjs/common';
import type { Request } from 'express';
import { Observable } from 'rxjs';
import { z } from 'zod';
import { routeParts } from './route-catalogue';
import { ZodValidationPipe } from './zod-validation.pipe';

const noQuery = new ZodValidationPipe(z.object({}).strict(), 'query');

/**
 * A route that declares no query schema takes no query: an unknown parameter is a 400 that
 * names it rather than being silently ignored, and a new route gets the rule for free.
 */
@Injectable()
export class UndeclaredQueryInterceptor implements NestInterceptor {
  private readonly declares = new WeakMap<object, boolean>();

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() === 'http' && !this.declaresQuery(context.getClass(), context.getHandler())) {
      noQuery.transform(context.switchToHttp().getRequest<Request>().query);
    }
    return next.handle();
  }

  private declaresQuery(controller: Type, handler: object): boolean {
    let known = this.declares.get(handler);
    if (known === undefined) {
      known = routeParts(controller, (handler as { name: string }).name).query !== undefined;
      this.declares.set(handler, known);
    }
    return known;
  }
}
