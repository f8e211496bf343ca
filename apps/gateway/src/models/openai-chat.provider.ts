import { z } from 'zod';
import { ModelHttpRequest, postForEvents, postJson } from './http';
import { ModelError, ModelMessage, ModelProvider, ModelRequest, ModelResponse, ModelToolCall } from './model-provider';

const responseSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z
            .array(z.object({ id: z.string(), function: z.object({ name: z.string(), arguments: z.string().default('') }) }))
            .nullable()
            .optional(),
        }),
      }),
    )
    .min(1),
  usage: usageSchema().optional(),
});

const chunkSchema = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: z.string().nullable().optional(),
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().min(0).max(1000),
                  id: z.string().optional(),
                  function: z.object({ name: z.string().optional(), arguments: z.string().optional() }).partial().optional(),
                }),
              )
              .nullable()
              .optional(),
          })
          .optional(),
      }),
    )
    .optional(),
  usage: usageSchema().nullable().optional(),
  error: z.object({ message: z.string() }).partial().optional(),
});

function usageSchema() {
  return z.object({ prompt_tokens: z.number(), completion_tokens: z.number() }).partial();
}

export interface OpenAiChatOptions {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  /** Ask for a streamed answer and report text as it arrives. */
  stream: boolean;
}

/**
 * OpenAI-compatible chat completions with tools: OpenAI, vLLM, Ollama, LM Studio,
 * OpenRouter and anything else that speaks `POST {base}/chat/completions`, streamed or not.
 */
export class OpenAiChatProvider implements ModelProvider {
  constructor(private readonly options: OpenAiChatOptions) {}

  complete(request: ModelRequest): Promise<ModelResponse> {
    return this.options.stream ? this.completeStreamed(request) : this.completeWhole(request);
  }

  private async completeWhole(request: ModelRequest): Promise<ModelResponse> {
    const json = await postJson(this.http(request, this.body(request)));
    const parsed = responseSchema.safeParse(json);
    if (!parsed.success) throw new ModelError('the model provider returned a response without choices', false);
    const message = parsed.data.choices[0].message;
    return {
      content: message.content ?? null,
      toolCalls: (message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
      usage: { inputTokens: parsed.data.usage?.prompt_tokens ?? 0, outputTokens: parsed.data.usage?.completion_tokens ?? 0 },
    };
  }

  private async completeStreamed(request: ModelRequest): Promise<ModelResponse> {
    const body = { ...this.body(request), stream: true, stream_options: { include_usage: true } };
    const answer = new StreamedAnswer();
    for await (const event of postForEvents(this.http(request, body))) {
      if (event.data === '[DONE]') break;
      let json: unknown;
      try {
        json = JSON.parse(event.data);
      } catch {
        throw new ModelError('the model provider streamed something that is not JSON', false);
      }
      const chunk = chunkSchema.safeParse(json);
      if (!chunk.success) throw new ModelError('the model provider streamed a chunk this client does not understand', false);
      if (chunk.data.error) throw new ModelError(`the model provider reported an error mid-stream: ${chunk.data.error.message ?? 'unknown'}`, true);
      const text = answer.add(chunk.data);
      if (text) request.onTextDelta?.(text);
    }
    return answer.result();
  }

  private body(request: ModelRequest): Record<string, unknown> {
    return {
      model: request.model,
      messages: [...(request.system ? [{ role: 'system', content: request.system }] : []), ...request.messages.map(toWire)],
      ...(request.tools.length > 0
        ? { tools: request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) }
        : {}),
    };
  }

  private http(request: ModelRequest, body: unknown): ModelHttpRequest {
    return {
      url: `${this.options.baseUrl.replace(/\/$/, '')}/chat/completions`,
      body,
      headers: this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : ({} as Record<string, string>),
      timeoutMs: this.options.timeoutMs,
      signal: request.signal,
    };
  }
}

/** Puts a streamed answer back together: text pieces, and tool calls assembled by index. */
export class StreamedAnswer {
  private text = '';
  private sawText = false;
  private readonly calls = new Map<number, ModelToolCall>();
  private inputTokens = 0;
  private outputTokens = 0;

  /** Adds one chunk; returns the new answer text it carried, if any. */
  add(chunk: z.infer<typeof chunkSchema>): string {
    if (chunk.usage) {
      this.inputTokens = chunk.usage.prompt_tokens ?? this.inputTokens;
      this.outputTokens = chunk.usage.completion_tokens ?? this.outputTokens;
    }
    let added = '';
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta;
      if (!delta) continue;
      if (typeof delta.content === 'string') {
        this.sawText = true;
        this.text += delta.content;
        added += delta.content;
      }
      for (const piece of delta.tool_calls ?? []) {
        const call = this.calls.get(piece.index) ?? { id: '', name: '', arguments: '' };
        if (piece.id) call.id = piece.id;
        if (piece.function?.name) call.name += piece.function.name;
        if (piece.function?.arguments) call.arguments += piece.function.arguments;
        this.calls.set(piece.index, call);
      }
    }
    return added;
  }

  result(): ModelResponse {
    const toolCalls = [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
    return {
      content: this.sawText ? this.text : null,
      toolCalls,
      usage: { inputTokens: this.inputTokens, outputTokens: this.outputTokens },
    };
  }
}

function toWire(m: ModelMessage): Record<string, unknown> {
  switch (m.role) {
    case 'user':
      return { role: 'user', content: m.content };
    case 'tool':
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        ...(m.toolCalls?.length
          ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
          : {}),
      };
  }
}
