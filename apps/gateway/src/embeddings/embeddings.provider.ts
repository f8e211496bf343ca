import { RunboxConfig } from '@app/config';
import { z } from 'zod';
import { postJson } from '../models/http';

/**
 * Turns texts into vectors for retrieval. Optional: without one, rag_search ranks by full
 * text alone. Vectors come back unit length, so a dot product is their cosine similarity.
 */
export interface EmbeddingsProvider {
  readonly model: string;
  embed(texts: string[]): Promise<number[][]>;
}

export const EMBEDDINGS_PROVIDER = Symbol('EMBEDDINGS_PROVIDER');

/** The provider failed or answered something unusable; the message is safe to show. */
export class EmbeddingsError extends Error {}

/** Texts sent per request; providers cap batch sizes (OpenAI: 2048 inputs). */
const BATCH = 64;
/** Characters of one input kept; embedding models read a few thousand tokens at most. */
const MAX_INPUT_CHARS = 8_000;

const responseSchema = z.object({
  data: z.array(z.object({ index: z.number().int().min(0), embedding: z.array(z.number()) })),
});

/** `POST {base}/embeddings` as OpenAI, vLLM, Ollama and LM Studio serve it. */
export class OpenAiEmbeddingsProvider implements EmbeddingsProvider {
  constructor(
    private readonly baseUrl: string,
    readonly model: string,
    private readonly apiKey: string | undefined,
    private readonly timeoutMs: number,
  ) {}

  async embed(texts: string[]): Promise<number[][]> {
    const out: number[][] = [];
    for (let i = 0; i < texts.length; i += BATCH) {
      const batch = texts.slice(i, i + BATCH).map((t) => t.slice(0, MAX_INPUT_CHARS) || ' ');
      let json: unknown;
      try {
        json = await postJson({
          url: `${this.baseUrl.replace(/\/$/, '')}/embeddings`,
          body: { model: this.model, input: batch },
          headers: this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {},
          timeoutMs: this.timeoutMs,
        });
      } catch (err) {
        // postJson speaks of "the model provider"; say which one failed.
        throw new EmbeddingsError(`embeddings (${this.model}): ${err instanceof Error ? err.message : String(err)}`);
      }
      const parsed = responseSchema.safeParse(json);
      if (!parsed.success || parsed.data.data.length !== batch.length) {
        throw new EmbeddingsError(`embeddings (${this.model}): the provider did not answer one embedding per input`);
      }
      const ordered = [...parsed.data.data].sort((a, b) => a.index - b.index);
      out.push(...ordered.map((d) => unitLength(d.embedding)));
    }
    return out;
  }
}

export function unitLength(v: number[]): number[] {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm > 0 ? v.map((x) => x / norm) : v;
}

/** The configured provider, or null when RUNBOX_EMBEDDINGS_MODEL is not set. */
export function createEmbeddingsProvider(config: RunboxConfig): EmbeddingsProvider | null {
  if (!config.RUNBOX_EMBEDDINGS_MODEL) return null;
  const baseUrl = config.RUNBOX_EMBEDDINGS_BASE_URL ?? config.RUNBOX_MODEL_BASE_URL;
  if (!baseUrl) return null;
  const apiKey = config.RUNBOX_EMBEDDINGS_BASE_URL ? config.RUNBOX_EMBEDDINGS_API_KEY : (config.RUNBOX_EMBEDDINGS_API_KEY ?? config.RUNBOX_MODEL_API_KEY);
  return new OpenAiEmbeddingsProvider(baseUrl, config.RUNBOX_EMBEDDINGS_MODEL, apiKey, config.RUNBOX_MODEL_TIMEOUT_MS);
}
