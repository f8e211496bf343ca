import { ModelMessage } from '../models/model-provider';
import { MessageView } from '../sessions/sessions.repository';

export const MISSING_RESULT = 'no result: the run ended before this tool call finished, so its outcome is unknown.';

/**
 * The stored history as the model reads it. Providers reject an assistant tool call that
 * is not answered by a tool result before the next turn, so any call left without one (a
 * run that failed or was cancelled mid-turn) gets a result saying so; tool results without
 * their call are dropped.
 */
export function toModelMessages(history: MessageView[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  let open: string[] = [];
  const closeOpen = () => {
    for (const id of open) out.push({ role: 'tool', toolCallId: id, content: MISSING_RESULT });
    open = [];
  };
  for (const m of history) {
    if (m.role === 'tool') {
      if (!m.toolCallId || !open.includes(m.toolCallId)) continue;
      open = open.filter((id) => id !== m.toolCallId);
      out.push({ role: 'tool', toolCallId: m.toolCallId, content: m.content ?? '' });
      continue;
    }
    closeOpen();
    if (m.role === 'user') out.push({ role: 'user', content: m.content ?? '' });
    else if (m.role === 'assistant') {
      const toolCalls = m.toolCalls ?? [];
      out.push({ role: 'assistant', content: m.content, ...(toolCalls.length > 0 ? { toolCalls } : {}) });
      open = toolCalls.map((c) => c.id);
    }
  }
  closeOpen();
  return out;
}
