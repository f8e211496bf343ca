import { z } from 'zod';
import { postJson } from './http';
import { ModelError, ModelMessage, ModelProvider, ModelRequest, ModelResponse } from './model-provider';

const ANTHROPIC_VERSION = '2023-06-01';

const responseSchema = z.object({
  // Thinking and other block types carry nothing the loop uses; they are skipped.
  content: z.array(z.object({ type: z.string(), text: z.string().optional(), id: z.string().optional(), name: z.string().optional(), input: z.unknown().optional() })),
  usage: z.object({ input_tokens: z.number(), output_tokens: z.number() }).partial().optional(),
});

export interface AnthropicOptions {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  maxTokens: number;
}

type Block =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content: string };

interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

/** Anthropic's Messages API (`POST {base}/messages`), with tools. */
export class AnthropicMessagesProvider implements ModelProvider {
  constructor(private readonly options: AnthropicOptions) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const body = {
      model: request.model,
      max_tokens: this.options.maxTokens,
      ...(request.system ? { system: request.system } : {}),
      messages: toAnthropicMessages(request.messages),
      ...(request.tools.length > 0
        ? { tools: request.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })) }
        : {}),
    };
    const json = await postJson({
      url: `${this.options.baseUrl.replace(/\/$/, '')}/messages`,
      body,
      headers: { 'anthropic-version': ANTHROPIC_VERSION, ...(this.options.apiKey ? { 'x-api-key': this.options.apiKey } : {}) },
      timeoutMs: this.options.timeoutMs,
      signal: request.signal,
    });
    const parsed = responseSchema.safeParse(json);
    if (!parsed.success) throw new ModelError('the model provider returned a Messages response without content', false);
    const text: string[] = [];
    const toolCalls: ModelResponse['toolCalls'] = [];
    for (const block of parsed.data.content) {
      if (block.type === 'text' && block.text !== undefined) text.push(block.text);
      else if (block.type === 'tool_use' && block.id && block.name) toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
    return {
      content: text.length > 0 ? text.join('') : null,
      toolCalls,
      usage: { inputTokens: parsed.data.usage?.input_tokens ?? 0, outputTokens: parsed.data.usage?.output_tokens ?? 0 },
    };
  }
}

/**
 * The Messages API wants tool results as `tool_result` blocks of a user turn, tool calls as
 * `tool_use` blocks with an object input, and user and assistant turns alternating; the
 * loop's neutral history is converted accordingly (adjacent user-side turns are merged).
 */
export function toAnthropicMessages(messages: ModelMessage[]): WireMessage[] {
  const out: WireMessage[] = [];
  const push = (role: WireMessage['role'], blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === 'user') push('user', m.content ? [{ type: 'text', text: m.content }] : []);
    else if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.toolCallId, content: m.content }]);
    else {
      const blocks: Block[] = m.content ? [{ type: 'text', text: m.content }] : [];
      for (const c of m.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: objectArguments(c.arguments) });
      push('assistant', blocks);
    }
  }
  return out;
}

function objectArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || '{}');
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
