import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';

/** One chat-completions request as the scripted server received it. */
export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: {
    model: string;
    messages: Array<{ role: string; content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string }>;
    tools?: Array<{ type: string; function: { name: string; description: string; parameters: unknown } }>;
    [key: string]: unknown;
  };
}

export type ScriptedReply =
  | { content: string }
  | { toolCalls: Array<{ id?: string; name: string; arguments: Record<string, unknown> | string }>; content?: string }
  | { status: number; body?: string };

export type ScriptStep = ScriptedReply | ((request: RecordedRequest) => ScriptedReply | Promise<ScriptedReply>);

/**
 * An OpenAI-compatible chat-completions server that answers from a script. Tests start it
 * on loopback and point the gateway at it, so the gateway's real HTTP client path runs.
 * When the script runs out it answers 500, which fails the run loudly.
 */
export class ScriptedModelServer {
  readonly requests: RecordedRequest[] = [];
  /** Inputs of every `POST …/embeddings` call, in order. */
  readonly embeddingInputs: string[][] = [];
  /**
   * Answers `POST …/embeddings` (OpenAI-compatible) with this function's vector for each
   * input; tests choose vectors they can reason about. Unset, that path answers 404.
   */
  embed?: (text: string) => number[];
  private readonly script: ScriptStep[] = [];
  private server?: Server;
  private callCounter = 0;

  /** Adds replies to the end of the script. */
  enqueue(...steps: ScriptStep[]): this {
    this.script.push(...steps);
    return this;
  }

  get remaining(): number {
    return this.script.length;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    if (req.url?.endsWith('/embeddings')) return this.handleEmbeddings(raw, res);
    const request: RecordedRequest = { path: req.url ?? '', headers: req.headers, body: JSON.parse(raw || '{}') };
    this.requests.push(request);
    const step = this.script.shift();
    const reply = step === undefined ? { status: 500, body: 'script exhausted' } : typeof step === 'function' ? await step(request) : step;
    if ('status' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body ?? '{"error":{"message":"scripted failure"}}');
      return;
    }
    const toolCalls =
      'toolCalls' in reply
        ? reply.toolCalls.map((c) => ({
            id: c.id ?? `call_${++this.callCounter}`,
            type: 'function',
            function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
          }))
        : undefined;
    const body = {
      id: `chatcmpl-${this.requests.length}`,
      object: 'chat.completion',
      model: request.body.model,
      choices: [
        {
          index: 0,
          finish_reason: toolCalls ? 'tool_calls' : 'stop',
          message: { role: 'assistant', content: reply.content ?? null, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  private handleEmbeddings(raw: string, res: ServerResponse): void {
    const embed = this.embed;
    if (!embed) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no embeddings model"}}');
      return;
    }
    const body = JSON.parse(raw || '{}') as { model?: string; input?: string | string[] };
    const inputs = typeof body.input === 'string' ? [body.input] : (body.input ?? []);
    this.embeddingInputs.push(inputs);
    const data = inputs.map((text, index) => ({ object: 'embedding', index, embedding: embed(text) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', model: body.model, data, usage: { prompt_tokens: 1, total_tokens: 1 } }));
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
