import { z } from 'zod';

/** A memory scope names who a fact belongs to within the tenant: `user:42`, `agent/support`. */
export const memoryScopeSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\w.:@/-]+$/, 'letters, digits and _ . : @ / - only');

export const MEMORY_MAX_CHARS = 4_000;
export const memoryContentSchema = z.string().trim().min(1, 'must not be empty').max(MEMORY_MAX_CHARS);

export const createMemorySchema = z.object({ content: memoryContentSchema, scope: memoryScopeSchema.optional() }).strict();
export type CreateMemoryInput = z.output<typeof createMemorySchema>;

export const listMemoryQuerySchema = z
  .object({
    query: z.string().max(1_000).optional(),
    scope: memoryScopeSchema.optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();
export type ListMemoryQuery = z.output<typeof listMemoryQuerySchema>;
