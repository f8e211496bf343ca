import { RUN_EVENT_DATA, TERMINAL_RUN_EVENTS } from '@app/contracts';
import { z } from 'zod';
import { eventStream, listOf, timestamp } from '../api-docs/api-operation';
import { createRunSchema } from './run-options';

const started = RUN_EVENT_DATA['run.started'].shape;

/** A run as every runs route answers it (see runJson). */
export const runSchema = z.object({
  id: z.string(),
  session_id: z.string(),
  parent_run_id: z.string().nullable().describe('for a sub-run (delegate_task): the run that made it'),
  parent_tool_call_id: z.string().nullable(),
  depth: z.number().int().describe('0 for a run a client made, 1 for its sub-runs, ...'),
  status: z.enum(['queued', 'running', 'requires_approval', 'completed', 'failed', 'cancelled']),
  output: z.string().nullable(),
  error: z.string().nullable(),
  usage: z.record(z.string(), z.unknown()).nullable(),
  options: createRunSchema
    .pick({ toolset: true, tools: true, enabled: true, disabled: true, approval_mode: true, permissions: true, limits: true, model: true, memory_scope: true })
    .describe('the options that govern the run, after saved defaults'),
  option_sources: z.record(z.string(), z.union([z.string(), z.array(z.string())])).describe('where each effective option came from: run, api_key or tenant'),
  tools: started.tools,
  tools_dropped: started.tools_dropped,
  created_at: timestamp(),
  started_at: timestamp().nullable(),
  completed_at: timestamp().nullable(),
}).meta({ id: 'Run' });
export type RunJson = z.output<typeof runSchema>;

export const pendingApprovalSchema = z.object({
  tool_call_id: z.string(),
  run_id: z.string(),
  name: z.string(),
  arguments: z.unknown(),
  reason: z.string().nullable(),
  expires_at: timestamp().nullable(),
});

export const runDetailSchema = runSchema.extend({ pending_approvals: z.array(pendingApprovalSchema).describe('calls waiting for a decision (status requires_approval)') });
export const runListSchema = listOf(runSchema);
export const approvalAnswerSchema = runSchema.extend({
  tool_call_id: z.string(),
  tool_call_run_id: z.string().describe('the run the call belongs to: this one, or a sub-run below it'),
  decision: z.enum(['approve', 'deny']),
});

export const runEventsContent = eventStream(RUN_EVENT_DATA, TERMINAL_RUN_EVENTS);
