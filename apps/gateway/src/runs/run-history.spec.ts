import { MessageView } from '../sessions/sessions.repository';
import { MISSING_RESULT, toModelMessages } from './run-history';

const msg = (m: Partial<MessageView> & Pick<MessageView, 'role'>): MessageView => ({
  id: 'm',
  runId: null,
  content: null,
  toolCalls: null,
  toolCallId: null,
  createdAt: new Date(0),
  ...m,
});

describe('toModelMessages', () => {
  it('keeps a well-formed history as it is', () => {
    const history = [
      msg({ role: 'user', content: 'hi' }),
      msg({ role: 'assistant', toolCalls: [{ id: 'a', name: 'terminal', arguments: '{}' }] }),
      msg({ role: 'tool', toolCallId: 'a', content: 'out' }),
      msg({ role: 'assistant', content: 'done' }),
    ];
    expect(toModelMessages(history)).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, toolCalls: [{ id: 'a', name: 'terminal', arguments: '{}' }] },
      { role: 'tool', toolCallId: 'a', content: 'out' },
      { role: 'assistant', content: 'done' },
    ]);
  });

  it('answers calls left without a result and drops results without a call', () => {
    const history = [
      msg({ role: 'user', content: 'first' }),
      msg({ role: 'assistant', toolCalls: [{ id: 'a', name: 'terminal', arguments: '{}' }, { id: 'b', name: 'terminal', arguments: '{}' }] }),
      msg({ role: 'tool', toolCallId: 'b', content: 'b out' }),
      msg({ role: 'tool', toolCallId: 'zzz', content: 'stray' }),
      msg({ role: 'user', content: 'second' }),
    ];
    expect(toModelMessages(history)).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: null, toolCalls: expect.any(Array) },
      { role: 'tool', toolCallId: 'b', content: 'b out' },
      { role: 'tool', toolCallId: 'a', content: MISSING_RESULT },
      { role: 'user', content: 'second' },
    ]);
  });
});
