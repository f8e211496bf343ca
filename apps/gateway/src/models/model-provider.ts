/** The model-facing view of a conversation, independent of any provider's wire format. */
export interface ModelToolCall {
  id: string;
  name: string;
  /** JSON text, as the model wrote it (it may not parse). */
  arguments: string;
}

export type ModelMessage =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

export interface ModelToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ModelRequest {
  model: string;
  system?: string;
  messages: ModelMessage[];
  tools: ModelToolSpec[];
  signal?: AbortSignal;
  /** Called with each piece of answer text as it streams in (streaming providers only). */
  onTextDelta?: (text: string) => void;
}

export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface ModelResponse {
  content: string | null;
  toolCalls: ModelToolCall[];
  usage: ModelUsage;
}

/** A failure talking to the model provider, with whether trying again could help. */
export class ModelError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface ModelProvider {
  complete(request: ModelRequest): Promise<ModelResponse>;
}

export const MODEL_PROVIDER = Symbol('MODEL_PROVIDER');
