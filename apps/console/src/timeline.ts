/**
 * A run's timeline, built from its events in order: what the run view draws. Pure, so the
 * same events always give the same timeline, whether they arrive live or on a reload.
 */

export interface ToolCallItem {
  kind: 'tool';
  id: string;
  name: string;
  args: unknown;
  state: 'proposed' | 'awaiting_approval' | 'running' | 'completed' | 'failed' | 'denied';
  output?: string;
  metadata?: Record<string, unknown>;
  reason?: string;
  /** The sub-run a delegate_task call started. */
  subRunId?: string;
}

export type TimelineItem =
  | { kind: 'input'; key: string; text: string }
  | { kind: 'turn'; key: string; text: string; streaming: boolean; toolCallIds: string[] }
  | { kind: 'warning'; key: string; text: string }
  | { kind: 'note'; key: string; text: string }
  | { kind: 'end'; key: string; status: 'completed' | 'failed' | 'cancelled'; text: string | null; usage: Record<string, number> | null };

export interface Timeline {
  items: TimelineItem[];
  calls: Record<string, ToolCallItem>;
  lastEventId: string | null;
}

export const emptyTimeline = (): Timeline => ({ items: [], calls: {}, lastEventId: null });

export interface RunEvent {
  id: string | null;
  type: string;
  data: Record<string, unknown>;
}

const TERMINAL = new Set(['run.completed', 'run.failed', 'run.cancelled']);
export const isTerminalEvent = (type: string): boolean => TERMINAL.has(type);

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The timeline after one more event (a new object; the old one is left as it was). */
export function applyEvent(t: Timeline, e: RunEvent): Timeline {
  const items = [...t.items];
  const calls = { ...t.calls };
  const key = `${e.id ?? items.length}-${e.type}`;
  const call = (id: string, patch: Partial<ToolCallItem>) => {
    const before = calls[id] ?? { kind: 'tool' as const, id, name: str(e.data.name) ?? '?', args: e.data.arguments, state: 'proposed' as const };
    calls[id] = { ...before, ...patch };
  };
  const streamingTurn = () => {
    const last = items[items.length - 1];
    return last?.kind === 'turn' && last.streaming ? items.length - 1 : -1;
  };
  const id = str(e.data.tool_call_id);
  switch (e.type) {
    case 'message.created': {
      if (e.data.role === 'user') {
        items.push({ kind: 'input', key, text: str(e.data.content) ?? '' });
        break;
      }
      if (e.data.role !== 'assistant') break;
      const toolCalls = Array.isArray(e.data.tool_calls) ? (e.data.tool_calls as Array<{ id: string; name: string; arguments: unknown }>) : [];
      for (const c of toolCalls) call(c.id, { name: c.name, args: c.arguments });
      const turn = { kind: 'turn' as const, key, text: str(e.data.content) ?? '', streaming: false, toolCallIds: toolCalls.map((c) => c.id) };
      const open = streamingTurn();
      if (open >= 0) items[open] = { ...turn, key: items[open].key };
      else items.push(turn);
      break;
    }
    case 'message.delta': {
      const open = streamingTurn();
      const text = str(e.data.text) ?? '';
      if (open >= 0) {
        const turn = items[open] as Extract<TimelineItem, { kind: 'turn' }>;
        items[open] = { ...turn, text: turn.text + text };
      } else items.push({ kind: 'turn', key, text, streaming: true, toolCallIds: [] });
      break;
    }
    case 'tool_call.started':
      if (id) call(id, { state: 'running', name: str(e.data.name) ?? calls[id]?.name ?? '?', args: e.data.arguments ?? calls[id]?.args });
      break;
    case 'tool_call.approval_required':
      if (id) call(id, { state: 'awaiting_approval', reason: str(e.data.reason) });
      break;
    case 'tool_call.approved':
      if (id) call(id, { state: 'running' });
      break;
    case 'tool_call.denied':
      if (id) call(id, { state: 'denied', reason: str(e.data.reason) ?? `denied by ${str(e.data.by) ?? 'the approver'}` });
      break;
    case 'tool_call.completed':
      if (id) {
        const failed = e.data.is_error === true;
        const denied = calls[id]?.state === 'denied';
        call(id, { state: denied ? 'denied' : failed ? 'failed' : 'completed', output: str(e.data.output) ?? '', metadata: (e.data.metadata as Record<string, unknown>) ?? {} });
      }
      break;
    case 'subrun.started':
      if (id) call(id, { subRunId: str(e.data.subrun_id) });
      break;
    case 'guardrail.warning':
      items.push({ kind: 'warning', key, text: str(e.data.message) ?? 'guardrail warning' });
      break;
    case 'run.requires_approval':
      items.push({ kind: 'note', key, text: 'Waiting for approval' });
      break;
    case 'run.resumed':
      items.push({ kind: 'note', key, text: 'Resumed' });
      break;
    case 'mcp.server_failed':
    case 'tool.source_failed':
      items.push({ kind: 'warning', key, text: `${e.type}: ${str(e.data.message) ?? str(e.data.error) ?? JSON.stringify(e.data)}` });
      break;
    case 'run.completed':
      items.push({ kind: 'end', key, status: 'completed', text: str(e.data.output) ?? null, usage: (e.data.usage as Record<string, number>) ?? null });
      break;
    case 'run.failed':
      items.push({ kind: 'end', key, status: 'failed', text: str(e.data.error) ?? str(e.data.message) ?? null, usage: (e.data.usage as Record<string, number>) ?? null });
      break;
    case 'run.cancelled':
      items.push({ kind: 'end', key, status: 'cancelled', text: str(e.data.reason) ?? null, usage: null });
      break;
    default:
      break;
  }
  return { items, calls, lastEventId: e.id ?? t.lastEventId };
}
