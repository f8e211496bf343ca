import { toAnthropicMessages } from './anthropic-messages.provider';
import { StreamedAnswer } from './openai-chat.provider';

describe('toAnthropicMessages', () => {
  it('turns tool calls into tool_use blocks and merges results and the next input into one user turn', () => {
    const wire = toAnthropicMessages([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'looking', toolCalls: [{ id: 't1', name: 'terminal', arguments: '{"command":"ls"}' }, { id: 't2', name: 'grep', arguments: 'not json' }] },
      { role: 'tool', toolCallId: 't1', content: 'a b' },
      { role: 'tool', toolCallId: 't2', content: 'refused' },
      { role: 'assistant', content: null },
      { role: 'user', content: 'next' },
    ]);
    expect(wire).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'looking' },
          { type: 'tool_use', id: 't1', name: 'terminal', input: { command: 'ls' } },
          { type: 'tool_use', id: 't2', name: 'grep', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'a b' },
          { type: 'tool_result', tool_use_id: 't2', content: 'refused' },
          { type: 'text', text: 'next' },
        ],
      },
    ]);
  });
});

describe('StreamedAnswer', () => {
  it('joins text pieces and assembles tool calls by index', () => {
    const answer = new StreamedAnswer();
    expect(answer.add({ choices: [{ delta: { content: 'Hel' } }] })).toBe('Hel');
    answer.add({ choices: [{ delta: { content: 'lo' } }] });
    answer.add({ choices: [{ delta: { tool_calls: [{ index: 1, id: 'b', function: { name: 'grep', arguments: '' } }] } }] });
    answer.add({ choices: [{ delta: { tool_calls: [{ index: 0, id: 'a', function: { name: 'terminal', arguments: '{"com' } }] } }] });
    answer.add({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'mand":"ls"}' } }] } }] });
    answer.add({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } });
    expect(answer.result()).toEqual({
      content: 'Hello',
      toolCalls: [
        { id: 'a', name: 'terminal', arguments: '{"command":"ls"}' },
        { id: 'b', name: 'grep', arguments: '' },
      ],
      usage: { inputTokens: 7, outputTokens: 3 },
    });
  });

  it('reports no content when only tool calls came', () => {
    const answer = new StreamedAnswer();
    answer.add({ choices: [{ delta: { tool_calls: [{ index: 0, id: 'a', function: { name: 'x', arguments: '{}' } }] } }] });
    expect(answer.result().content).toBeNull();
  });
});
