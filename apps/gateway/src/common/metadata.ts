import { z } from 'zod';

const MAX_KEYS = 64;
const MAX_JSON_CHARS = 16_384;

/** Client metadata on sessions: a small JSON object, stored and returned as given. */
export const metadataSchema = z
  .record(z.string().min(1).max(200), z.unknown())
  .refine((m) => Object.keys(m).length <= MAX_KEYS, `at most ${MAX_KEYS} keys`)
  .refine((m) => JSON.stringify(m).length <= MAX_JSON_CHARS, `at most ${MAX_JSON_CHARS} characters as JSON`);

/** For routes that take no body: none, or `{}`; any field in it is a 400 naming the field. */
export const emptyBodySchema = z.object({}).strict();
