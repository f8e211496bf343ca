import { z } from 'zod';
import { memoryScopeSchema } from '../memory/memory.schemas';
import { TOOLSET_NAMES } from '../tools/tool-registry';

const toolName = z.string().min(1).max(128);

export const runLimitsSchema = z
  .object({
    max_output_chars: z.number().int().min(100).max(1_000_000).optional(),
    warn_after: z.number().int().min(1).max(10_000).optional(),
    hard_stop_after: z.number().int().min(1).max(10_000).optional(),
    timeouts: z.record(toolName, z.number().int().min(1).max(900)).optional(),
  })
  .strict();

export const createRunSchema = z
  .object({
    session_id: z.string().min(1).max(64).optional(),
    input: z.string().min(1).max(200_000),
    model: z.string().min(1).max(200).optional(),
    system: z.string().max(100_000).optional(),
    toolset: z.enum(TOOLSET_NAMES).optional(),
    enabled: z.array(toolName).max(200).optional(),
    disabled: z.array(toolName).max(200).optional(),
    tools: z.array(z.string().min(1).max(129)).max(200).optional(),
    approval_mode: z.enum(['auto', 'prompt', 'deny']).optional(),
    permissions: z
      .object({
        allow: z.array(z.string().min(1).max(1000)).max(200).optional(),
        ask: z.array(z.string().min(1).max(1000)).max(200).optional(),
        deny: z.array(z.string().min(1).max(1000)).max(200).optional(),
      })
      .strict()
      .optional(),
    limits: runLimitsSchema.optional(),
    metadata: z.record(z.string().max(200), z.unknown()).optional(),
    /** Narrows the memory tool to this scope (e.g. an end user or agent name) plus the tenant's shared facts. */
    memory_scope: memoryScopeSchema.optional(),
  })
  .strict();

export type CreateRunInput = z.infer<typeof createRunSchema>;

/** What a run keeps of its request (everything but the ids and the input). */
export type RunOptions = Omit<CreateRunInput, 'session_id' | 'input'>;
