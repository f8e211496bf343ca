/**
 * Request and response shapes of the Runbox HTTP API (v1), as this SDK sends and reads
 * them. JSON uses snake_case, as the API does. Fields may be added by newer servers.
 */

export type RunStatus = 'queued' | 'running' | 'requires_approval' | 'completed' | 'failed' | 'cancelled';
export type ApprovalMode = 'auto' | 'prompt' | 'deny';

export interface PermissionRules {
  allow?: string[];
  ask?: string[];
  deny?: string[];
}

export interface RunLimits {
  max_output_chars?: number;
  warn_after?: number;
  hard_stop_after?: number;
  approval_timeout_seconds?: number;
  timeouts?: Record<string, number>;
  [name: string]: unknown;
}

/** The body of POST /v1/runs. */
export interface CreateRunBody {
  input: string;
  session_id?: string;
  model?: string;
  system?: string;
  toolset?: string;
  enabled?: string[];
  disabled?: string[];
  tools?: string[];
  approval_mode?: ApprovalMode;
  permissions?: PermissionRules;
  limits?: RunLimits;
  [name: string]: unknown;
}

export interface RunUsage {
  input_tokens?: number;
  output_tokens?: number;
  tool_calls?: number;
  wall_ms?: number;
  [name: string]: unknown;
}

/** A tool call waiting for a decision (GET /v1/runs/{id} while `requires_approval`). */
export interface PendingApproval {
  tool_call_id: string;
  run_id: string;
  name: string;
  arguments: Record<string, unknown>;
  reason: string | null;
  expires_at: string | null;
}

export interface Run {
  id: string;
  session_id: string;
  parent_run_id?: string | null;
  status: RunStatus;
  output?: string | null;
  error?: string | null;
  usage?: RunUsage | null;
  created_at: string;
  started_at?: string | null;
  completed_at?: string | null;
  /** Present on GET /v1/runs/{id}. */
  pending_approvals?: PendingApproval[];
  [name: string]: unknown;
}

export interface RunListParams {
  session_id?: string;
  parent_run_id?: string;
  limit?: number;
}

export interface ApprovalResult extends Run {
  tool_call_id: string;
  decision: 'approve' | 'deny';
}

export interface SandboxInfo {
  state: string;
}

export interface SessionInfo {
  id: string;
  status: string;
  metadata?: Record<string, unknown>;
  created_at: string;
  sandbox?: SandboxInfo;
  backend?: { type: string; server: string };
  [name: string]: unknown;
}

export interface CreateSessionBody {
  metadata?: Record<string, unknown>;
  /** Run the session's tools on a registered server instead of a container. */
  backend?: { type: 'ssh'; server: string };
}

export interface SessionListParams {
  limit?: number;
}

/** What POST /v1/sessions/{id}/tools/{name} answers. */
export interface ToolResult {
  output: string;
  metadata: Record<string, unknown>;
  is_error: boolean;
}

export interface ToolInfo {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  mutating: boolean;
  toolsets: string[];
  [name: string]: unknown;
}

/** What PUT /v1/sessions/{id}/files/{path} answers. */
export interface FileWriteResult {
  path?: string;
  size: number;
  sha256: string;
  [name: string]: unknown;
}

// ---- run events (GET /v1/runs/{id}/events) ----

interface EventOf<T extends string, D> {
  /** The event's sequence number within its run (the SSE `id:`); it only increases. */
  id: number;
  type: T;
  data: D;
}

export type RunQueuedEvent = EventOf<'run.queued', { session_id: string; parent_run_id?: string; parent_tool_call_id?: string }>;
export type RunStartedEvent = EventOf<'run.started', { session_id: string; [name: string]: unknown }>;
export type RunResumedEvent = EventOf<'run.resumed', { reason: string; recoveries: number }>;
export type RunRequiresApprovalEvent = EventOf<'run.requires_approval', { tool_call_ids: string[] }>;
export type MessageDeltaEvent = EventOf<'message.delta', { role: 'assistant'; text: string }>;
export type MessageCreatedEvent = EventOf<
  'message.created',
  { role: 'user' | 'assistant'; content: string | null; tool_calls?: Array<{ id: string; name: string; arguments: string }> }
>;
export type ToolCallStartedEvent = EventOf<'tool_call.started', { tool_call_id: string; name: string; arguments: Record<string, unknown> }>;
export type ToolCallApprovalRequiredEvent = EventOf<
  'tool_call.approval_required',
  { tool_call_id: string; name: string; arguments: Record<string, unknown>; reason: string; expires_at: string }
>;
export type ToolCallApprovedEvent = EventOf<'tool_call.approved', { tool_call_id: string; by: string; reason?: string }>;
export type ToolCallDeniedEvent = EventOf<'tool_call.denied', { tool_call_id: string; by: string; reason?: string }>;
export type ToolCallCompletedEvent = EventOf<
  'tool_call.completed',
  { tool_call_id: string; name: string; status: string; output: string; is_error: boolean; metadata: Record<string, unknown> }
>;
export type GuardrailWarningEvent = EventOf<
  'guardrail.warning',
  { kind: string; tool_calls: number; warn_after?: number; hard_stop_after?: number; message: string }
>;
export type RunCompletedEvent = EventOf<'run.completed', { output: string; usage: RunUsage }>;
export type RunFailedEvent = EventOf<'run.failed', { error: string }>;
export type RunCancelledEvent = EventOf<'run.cancelled', { reason?: string }>;

/**
 * One event of a run's stream, narrowed by `type`. A server newer than this SDK may send
 * types not listed here; they are passed on as they come.
 */
export type RunEvent =
  | RunQueuedEvent
  | RunStartedEvent
  | RunResumedEvent
  | RunRequiresApprovalEvent
  | MessageDeltaEvent
  | MessageCreatedEvent
  | ToolCallStartedEvent
  | ToolCallApprovalRequiredEvent
  | ToolCallApprovedEvent
  | ToolCallDeniedEvent
  | ToolCallCompletedEvent
  | GuardrailWarningEvent
  | RunCompletedEvent
  | RunFailedEvent
  | RunCancelledEvent;

export type RunEventType = RunEvent['type'];

export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set(['run.completed', 'run.failed', 'run.cancelled']);
export const TERMINAL_RUN_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);
