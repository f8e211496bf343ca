import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';

export const memorySchema = z.object({
  id: z.string(),
  content: z.string(),
  scope: z.string().nullable().describe('null: shared by every scope of the tenant'),
  run_id: z.string().nullable().describe('the run that saved it, if a run did'),
  created_at: timestamp(),
  score: z.number().optional().describe('with `query`: how well it matched'),
  match: z.enum(['text', 'fuzzy']).optional().describe('with `query`: a full-text match, or substring/trigram similarity'),
}).meta({ id: 'Memory' });
export const memoryListSchema = listOf(memorySchema);
export const savedMemorySchema = memorySchema.extend({ created: z.boolean().describe('false when the same content was already stored in that scope') });
