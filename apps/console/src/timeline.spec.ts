import { applyEvent, emptyTimeline, RunEvent, Timeline } from './timeline';

const replay = (events: Array<[string, Record<string, unknown>]>): Timeline =>
  events.reduce((t, [type, data], i) => applyEvent(t, { id: String(i + 1), type, data } as RunEvent), emptyTimeline());

describe('run timeline', () => {
  it('puts the input, the model turn and each tool call with its result in order', () => {
    const t = replay([
      ['run.started', {}],
      ['message.created', { role: 'user', content: 'list files' }],
      ['message.created', { role: 'assistant', content: 'Looking.', tool_calls: [{ id: 'c1', name: 'list_files', arguments: { path: '.' } }] }],
      ['tool_call.started', { tool_call_id: 'c1', name: 'list_files', arguments: { path: '.' } }],
      ['tool_call.completed', { tool_call_id: 'c1', name: 'list_files', status: 'completed', output: 'a.txt', is_error: false, metadata: {} }],
      ['run.completed', { output: 'one file', usage: { model_calls: 2 } }],
    ]);
    expect(t.items.map((i) => i.kind)).toEqual(['input', 'turn', 'end']);
    expect(t.calls.c1).toMatchObject({ name: 'list_files', state: 'completed', output: 'a.txt', args: { path: '.' } });
    expect(t.lastEventId).toBe('6');
  });

  it('joins streamed text into one turn that the stored message then completes', () => {
    const t = replay([
      ['message.delta', { text: 'Hel' }],
      ['message.delta', { text: 'lo' }],
      ['message.created', { role: 'assistant', content: 'Hello', tool_calls: [] }],
    ]);
    expect(t.items).toHaveLength(1);
    expect(t.items[0]).toMatchObject({ kind: 'turn', text: 'Hello', streaming: false });
  });

  it('keeps a denied call denied when its result arrives, and links a sub-run to its delegate_task call', () => {
    const t = replay([
      ['tool_call.approval_required', { tool_call_id: 'c1', name: 'terminal', arguments: { command: 'rm x' } }],
      ['tool_call.denied', { tool_call_id: 'c1', by: 'approver', reason: 'no' }],
      ['tool_call.completed', { tool_call_id: 'c1', output: 'denied', is_error: true }],
      ['tool_call.started', { tool_call_id: 'c2', name: 'delegate_task', arguments: {} }],
      ['subrun.started', { tool_call_id: 'c2', subrun_id: 'run_sub' }],
    ]);
    expect(t.calls.c1).toMatchObject({ state: 'denied', reason: 'no' });
    expect(t.calls.c2).toMatchObject({ state: 'running', subRunId: 'run_sub' });
  });
});
