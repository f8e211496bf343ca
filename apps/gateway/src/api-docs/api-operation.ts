import { SetMetadata, Type } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z, ZodType } from 'zod';

/** A successful answer that is not a JSON body. */
export type ApiContent =
  | { kind: 'text'; contentType: string; description: string }
  /** Server-sent events: each SSE `event:` type with the schema of its `data:`. */
  | { kind: 'events'; events: Record<string, ZodType>; terminal: readonly string[] };

export interface ApiOperationOptions {
  summary: string;
  /** Longer prose for the reference page (Markdown-free: shown as written). */
  description?: string;
  /**
   * The successful answer's JSON body (described by its output shape), other content, or
   * nothing for an empty answer (204). The same schema should type the code that builds it.
   */
  response?: ZodType | ApiContent;
  /** The success status when a handler sets it itself (otherwise Nest's: @HttpCode, or 201 for POST). */
  status?: number;
  /** Other successful statuses the route may answer, with what each means. */
  alsoAnswers?: Record<number, string>;
  /**
   * Error codes this route answers beyond the ones its decorators already imply (a bad
   * body or query, a missing id, an API key or admin token refused, the database away).
   */
  errors?: readonly ErrorCode[];
  /** The group it is listed under; by default the path's first segment after `/v1` (`runs`). */
  tag?: string;
}

const API_OPERATION = 'runbox:api-operation';

/**
 * Describes a route for the API document (GET /openapi.json) and the reference page. Every
 * route needs one: the document refuses to build with a route that has none, naming it.
 * Request shapes are not repeated here; they come from the route's ValidBody, ValidQuery,
 * ValidParam, ValidHeader and PathId parameters.
 */
export const ApiOperation = (options: ApiOperationOptions): MethodDecorator => SetMetadata(API_OPERATION, options);

export function apiOperationOf(controller: Type, handler: string): ApiOperationOptions | undefined {
  const fn = (controller.prototype as Record<string, unknown>)[handler];
  return typeof fn === 'function' ? (Reflect.getMetadata(API_OPERATION, fn) as ApiOperationOptions | undefined) : undefined;
}

export const plainText = (contentType: string, description: string): ApiContent => ({ kind: 'text', contentType, description });

export const eventStream = (events: Record<string, ZodType>, terminal: readonly string[]): ApiContent => ({ kind: 'events', events, terminal });

/** The `{data: [...]}` envelope every listing answers with. */
export const listOf = <T extends ZodType>(item: T) => z.object({ data: z.array(item) });

/** An ISO 8601 timestamp as the API writes it (`Date.toISOString()`). */
export const timestamp = () => z.iso.datetime();
