import { fromZodError } from '@app/errors';
import { ZodType } from 'zod';

/** Parses a request part with its schema; a failure is a 400 naming the field (e.g. `body.input`). */
export function validate<T>(schema: ZodType<T>, value: unknown, where: 'body' | 'query' | 'path' | `header.${string}`): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw fromZodError(parsed.error, where);
  return parsed.data;
}
