import { ZodError } from 'zod';
import { AppError } from './app-error';

/** Turns a zod failure into a 400 that names each bad field, e.g. `body.input: Required`. */
export function fromZodError(error: ZodError, where: string): AppError {
  const issues = error.issues.map((issue) => ({
    field: [where, ...issue.path.map(String)].join('.'),
    message: issue.message,
  }));
  const summary = issues.map((i) => `${i.field}: ${i.message}`).join('; ');
  return AppError.validation(summary, { issues });
}
