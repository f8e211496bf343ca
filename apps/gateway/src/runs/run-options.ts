import { z } from 'zod';
import { memoryScopeSchema } from '../memory/memory.schemas';
import { TOOLSET_NAMES } from '../tools/tool-registry';
import { ruleProblem } from './permission-rules';

const toolName = z.string().min(1).max(128);

/** Defaults of the limits a run may set (seed 000 "Limits"; the repetition guard is Runbox's). */
export const LIMIT_DEFAULTS = {
  max_output_chars: 30_000,
  warn_after: 24,
  hard_stop_after: 32,
  /** How many identical calls (same tool, same arguments) may run in a row; the next is refused. */
  repeat_limit: 3,
} as const;

export const runLimitsSchema = z
  .object({
    max_output_chars: z.number().int().min(100).max(1_000_000).optional(),
    warn_after: z.number().int().min(1).max(10_000).optional(),
    hard_stop_after: z.number().int().min(1).max(10_000).optional(),
    repeat_limit: z.number().int().min(1).max(1_000).optional(),
    timeouts: z.record(toolName, z.number().int().min(1).max(900)).optional(),
    approval_timeout_seconds: z.number().int().min(1).max(7 * 24 * 3600).optional(),
  })
  .strict()
  .refine((l) => l.warn_after === undefined || l.hard_stop_after === undefined || l.warn_after < l.hard_stop_after, {
    message: 'warn_after must be less than hard_stop_after',
    path: ['warn_after'],
  });

const rule = z
  .string()
  .min(1)
  .max(1000)
  .superRefine((text, ctx) => {
    const problem = ruleProblem(text);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

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
        allow: z.array(rule).max(200).optional(),
        ask: z.array(rule).max(200).optional(),
        deny: z.array(rule).max(200).optional(),
      })
      .strict()
      .optional(),
    limits: runLimitsSchema.optional(),
    /** What to do when the session already has a run going: `reject` (409, the default) or `enqueue` (start after it). */
    on_busy: z.enum(['reject', 'enqueue']).optional(),
    metadata: z.record(z.string().max(200), z.unknown()).optional(),
    /** Narrows the memory tool to this scope (e.g. an end user or agent name) plus the tenant's shared facts. */
    memory_scope: memoryScopeSchema.optional(),
  })
  .strict();

export type CreateRunInput = z.infer<typeof createRunSchema>;

/** What a run keeps of its request (everything but the ids, the input and the queueing choice). */
export type RunOptions = Omit<CreateRunInput, 'session_id' | 'input' | 'on_busy' | 'metadata'>;

export const approvalSchema = z
  .object({
    tool_call_id: z.string().min(1).max(128),
    decision: z.enum(['approve', 'deny']),
    reason: z.string().max(2000).optional(),
  })
  .strict();

export type ApprovalInput = z.infer<typeof approvalSchema>;

/** The limits in force for a run: its own, else the defaults. */
export function effectiveLimits(options: RunOptions) {
  const l = options.limits ?? {};
  return {
    maxOutputChars: l.max_output_chars ?? LIMIT_DEFAULTS.max_output_chars,
    warnAfter: l.warn_after ?? LIMIT_DEFAULTS.warn_after,
    hardStopAfter: l.hard_stop_after ?? LIMIT_DEFAULTS.hard_stop_after,
    repeatLimit: l.repeat_limit ?? LIMIT_DEFAULTS.repeat_limit,
    timeouts: l.timeouts,
    approvalTimeoutSeconds: l.approval_timeout_seconds,
  };
}

export type EffectiveLimits = ReturnType<typeof effectiveLimits>;
