import { redactSecrets } from '@app/logging';
import { z } from 'zod';
import { ModelError, ModelMessage, ModelProvider, ModelRequest, ModelResponse } from './model-provider';

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
  usage: z.object({ prompt_tokens: z.number().default(0), completion_tokens: z.number().default(0) }).partial().optional(),
});

/**
 * OpenAI-compatible chat completions with tools: OpenAI, vLLM, Ollama, LM Studio,
 * OpenRouter and anything else that speaks `POST {base}/chat/completions`.
 */
export class OpenAiChatProvider implements ModelProvider {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string | undefined,
    private readonly timeoutMs: number,
  ) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const body = {
      model: request.model,
      messages: [...(request.system ? [{ role: 'system', content: request.system }] : []), ...request.messages.map(toWire)],
      ...(request.tools.length > 0
        ? { tools: request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) }
        : {}),
    };
    const json = await postJson(`${this.baseUrl.replace(/\/$/, '')}/chat/completions`, body, this.headers(), this.timeoutMs, request.signal);
    const parsed = responseSchema.safeParse(json);
    if (!parsed.success) throw new ModelError('the model provider returned a response without choices', false);
    const message = parsed.data.choices[0].message;
    return {
      content: message.content ?? null,
      toolCalls: (message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
      usage: { inputTokens: parsed.data.usage?.prompt_tokens ?? 0, outputTokens: parsed.data.usage?.completion_tokens ?? 0 },
    };
  }

  private headers(): Record<string, string> {
    return this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {};
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

/** POSTs JSON and returns the parsed answer; every failure becomes a ModelError with a readable message. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<unknown> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: combined });
  } catch (err) {
    if (signal?.aborted) throw new ModelError('the model call was cancelled', false);
    if (timeout.aborted) throw new ModelError(`the model provider did not answer within ${timeoutMs} ms`, true);
    throw new ModelError(`could not reach the model provider: ${err instanceof Error ? err.message : String(err)}`, true);
  }
  const text = await res.text();
  if (!res.ok) {
    // Providers sometimes quote the key they were sent; it must not reach the run's error.
    const sentKey = headers.authorization?.replace(/^Bearer\s+/i, '');
    const snippet = redactSecrets(text, sentKey ? [sentKey] : []).slice(0, 300).replace(/\s+/g, ' ');
    throw new ModelError(`the model provider answered HTTP ${res.status}: ${snippet}`, res.status === 429 || res.status >= 500);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ModelError('the model provider answered with something that is not JSON', false);
  }
}
