import { PipeTransform } from '@nestjs/common';
import { AppError, fromZodError } from '@app/errors';
import { ZodType } from 'zod';
import { findUnstorableText } from '../storable-text';

/** Where a value comes from, as error messages name it: `body.input`, `query.limit`, `header.last-event-id`. */
export type RequestPart = 'body' | 'query' | 'path' | `header.${string}`;

export interface ZodValidationOptions {
  /** What a request without this part stands for (a body-less POST, a missing header). */
  absent?: unknown;
  /** A JSON `null` body counts as absent too. */
  nullIsAbsent?: boolean;
}

/**
 * Validates one part of a request with its zod schema; a failure is a 400 that names each
 * bad field. Before the schema, every string and key anywhere in the value is checked for
 * text Postgres cannot store (NUL, lone surrogates), free-form JSON included: refused here,
 * such text would otherwise reach a query and fail there.
 */
export class ZodValidationPipe<T = unknown> implements PipeTransform<unknown, T> {
  constructor(
    readonly schema: ZodType<T>,
    readonly part: RequestPart,
    readonly options: ZodValidationOptions = {},
  ) {}

  transform(value: unknown): T {
    const absent = value === undefined || (value === null && this.options.nullIsAbsent === true);
    const input = absent && this.options.absent !== undefined ? this.options.absent : value;
    const unstorable = findUnstorableText(input, this.part);
    if (unstorable) {
      throw AppError.validation(`${unstorable.field}: ${unstorable.message}`, { issues: [unstorable] });
    }
    const parsed = this.schema.safeParse(input);
    if (!parsed.success) throw fromZodError(parsed.error, this.part);
    return parsed.data;
  }
}
