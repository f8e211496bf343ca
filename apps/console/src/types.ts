/** The API's shapes, as far as the console reads them. */

export type RunStatus = 'queued' | 'running' | 'requires_approval' | 'completed' | 'failed' | 'cancelled';

export interface Run {
  id: string;
  session_id: string;
  parent_run_id: string | null;
  status: RunStatus;
  output: string | null;
  error: string | null;
  usage: Record<string, number> | null;
  options: { toolset?: string; model?: string; approval_mode?: string };
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  pending_approvals?: PendingApproval[];
}

export interface PendingApproval {
  tool_call_id: string;
  run_id: string;
  name: string;
  arguments: unknown;
  reason: string | null;
}

export interface Session {
  id: string;
  status: string;
  metadata?: Record<string, unknown>;
  created_at: string;
  sandbox?: { state: string };
}

export interface Message {
  id: string;
  run_id: string | null;
  role: string;
  content: string | null;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: unknown } }>;
  tool_call_id?: string;
  created_at: string;
}

export interface Todo {
  id?: string;
  content?: string;
  text?: string;
  status: string;
}

export interface Tool {
  name: string;
  description: string;
  mutating: boolean;
  toolsets: string[];
  available?: boolean;
  unavailable_reason?: string;
  origin?: string;
}

export interface Toolset {
  name: string;
  tools: string[];
}

export interface McpServer {
  id: string;
  name: string;
  transport: string;
  status: string;
  last_error?: string | null;
}

export interface SavedServer {
  id: string;
  name: string;
  host: string;
  port: number;
  username: string;
  host_key_pinned_at: string | null;
}

export interface Memory {
  id: string;
  content: string;
  scope: string | null;
  created_at: string;
  score?: number;
}

export interface Skill {
  name: string;
  description: string;
  builtin: boolean;
  updated_at: string | null;
  content?: string;
}

export interface Tenant {
  id: string;
  name: string;
  limits: Record<string, number>;
  run_defaults: Record<string, unknown> | null;
  created_at: string;
}

export interface ApiKey {
  id: string;
  name: string | null;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}

export interface Page<T> {
  data: T[];
}
