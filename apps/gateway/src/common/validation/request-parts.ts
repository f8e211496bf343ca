import { Body, createParamDecorator, ExecutionContext, Param, Query } from '@nestjs/common';
import type { Request } from 'express';
import { ZodType } from 'zod';
import { PathIdPipe } from './path-id.pipe';
import { ZodValidationOptions, ZodValidationPipe } from './zod-validation.pipe';

/**
 * Parameter decorators that validate a request part with a zod schema. The schemas stay in
 * Nest's route metadata, so the route catalogue (and the fuzz test built on it) sees each
 * route's body, query, path and header schemas without a list of its own.
 */

/** The JSON body, parsed by `schema`. */
export const ValidBody = <T>(schema: ZodType<T>, options?: ZodValidationOptions): ParameterDecorator =>
  Body(new ZodValidationPipe(schema, 'body', options));

/** The query string. A route without one takes no query at all (UndeclaredQueryGuard). */
export const ValidQuery = <T>(schema: ZodType<T>): ParameterDecorator => Query(new ZodValidationPipe(schema, 'query'));

/** A path parameter that is not an id, parsed by `schema` (a 400 naming `path`). */
export const ValidParam = <T>(name: string, schema: ZodType<T>): ParameterDecorator => Param(name, new ZodValidationPipe(schema, 'path'));

/** The `:id` path parameter: a malformed id is a 404, like an unknown one. */
export const PathId = (kind: string, name = 'id'): ParameterDecorator => Param(name, new PathIdPipe(kind));

const header = createParamDecorator((name: string, ctx: ExecutionContext): string | undefined => {
  const value = ctx.switchToHttp().getRequest<Request>().headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
});

/** One request header (lower-case name), parsed by `schema`; a missing header is `undefined`. */
export const ValidHeader = <T>(name: string, schema: ZodType<T>): ParameterDecorator =>
  header(name, new ZodValidationPipe(schema, `header.${name}`));
