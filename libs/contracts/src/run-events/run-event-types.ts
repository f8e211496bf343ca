import { z } from 'zod';

/**
 * The events of a run as `GET /v1/runs/{id}/events` sends them: the SSE `event:` line is the
 * type, `data:` the JSON below.
 * The gateway may only store events of these types (its NewEvent type is keyed by them), so
 * a new kind of event is described here, and in the API document, before it can be sent.
 */
const usage = z.object({
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  model_calls: z.number().int(),
  tool_calls: z.number().int(),
});
const selectedTools = {
  tools: z.array(z.object({ name: z.string(), source: z.string() })).describe('the tools the run is offered, with what put each there'),
  tools_dropped: z
    .array(z.object({ name: z.string(), reason: z.enum(['unknown', 'disabled', 'unavailable']), detail: z.string().optional() }))
    .describe('what the selection named and the run does not get, and why'),
};
const subRun = z.string().describe('the sub-run (delegate_task) the event is about');
const toolCallId = z.string();
const freeForm = z.record(z.string(), z.unknown());
/** Every event's data names its run. */
const data = <T extends z.ZodRawShape>(shape: T) => z.object({ run_id: z.string(), ...shape });

export const RUN_EVENT_DATA = {
  'run.queued': data({ session_id: z.string(), parent_run_id: z.string().optional(), parent_tool_call_id: z.string().optional() }),
  'run.started': data({ session_id: z.string(), ...selectedTools }),
  'run.resumed': data({
    reason: z.string().describe('why the run went on: `approval` after a decision, or the recovery that took it over'),
    recoveries: z.number().int().optional(),
    subrun_id: subRun.optional(),
  }),
  'run.requires_approval': data({ tool_call_ids: z.array(toolCallId), subrun_id: subRun.optional() }),
  'run.completed': data({ output: z.string(), usage }),
  'run.failed': data({ error: z.string() }),
  'run.cancelled': data({ reason: z.string().optional() }),
  'message.created': data({
    role: z.enum(['user', 'assistant']),
    content: z.string().nullable(),
    tool_calls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.string() })).optional(),
  }),
  'message.delta': data({ role: z.literal('assistant'), text: z.string() }).describe('a piece of the answer being streamed (RUNBOX_MODEL_STREAM)'),
  'tool_call.started': data({ tool_call_id: toolCallId, name: z.string(), arguments: freeForm }),
  'tool_call.approval_required': data({ tool_call_id: toolCallId, name: z.string(), arguments: freeForm, reason: z.string(), expires_at: z.iso.datetime() }),
  'tool_call.approved': data({ tool_call_id: toolCallId, by: z.literal('approver'), reason: z.string().optional() }),
  'tool_call.denied': data({ tool_call_id: toolCallId, by: z.enum(['approver', 'timeout']), reason: z.string().optional() }),
  'tool_call.completed': data({
    tool_call_id: toolCallId,
    name: z.string(),
    status: z.string().describe('how the call ended: completed, failed, denied, ...'),
    output: z.string(),
    is_error: z.boolean(),
    metadata: freeForm,
  }),
  'guardrail.warning': data({
    kind: z.enum(['warning', 'hard_stop']),
    tool_calls: z.number().int(),
    warn_after: z.number().int(),
    hard_stop_after: z.number().int(),
    message: z.string(),
  }),
  'subrun.started': data({ tool_call_id: toolCallId, subrun_id: subRun, depth: z.number().int(), ...selectedTools }),
  'subrun.approval_required': data({
    subrun_id: subRun,
    tool_call_id: toolCallId,
    name: z.string(),
    arguments: freeForm,
    reason: z.string().nullable(),
    expires_at: z.iso.datetime().nullable(),
  }),
  'tool.source_skipped': data({ name: z.string(), origin: z.string(), reason: z.string() }).describe('a tenant-added tool left out of the run'),
  'tool.source_failed': data({ source: z.string(), error: z.string() }).describe('a source of tenant-added tools that could not list them'),
  'mcp.server_failed': data({ server: z.string(), error: z.string() }).describe('an MCP server whose tools the run could not get'),
} satisfies Record<string, z.ZodObject>;

export type RunEventType = keyof typeof RUN_EVENT_DATA;
export const RUN_EVENT_TYPES = Object.keys(RUN_EVENT_DATA) as RunEventType[];

/** The events after which a run's stream ends. */
export const TERMINAL_RUN_EVENTS: readonly RunEventType[] = ['run.completed', 'run.failed', 'run.cancelled'];
