import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';

export const skillSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  builtin: z.boolean().describe('built-in skills are read-only'),
  updated_at: timestamp().nullable().describe('null for a built-in skill'),
}).meta({ id: 'Skill' });
export const skillListSchema = listOf(skillSummarySchema);

export const skillSchema = skillSummarySchema.extend({ content: z.string().describe('the skill text (Markdown)') });
