import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';

/** One request as the scripted server received it. */
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

/** Picks the requests a route answers (see `route`). */
export type RequestMatcher = (request: RecordedRequest) => boolean;

export interface ScriptedModelOptions {
  /** `openai` chat completions (default) or `anthropic` Messages. */
  format?: 'openai' | 'anthropic';
}

/**
 * A model server that answers from a script: OpenAI-compatible chat completions (plain or
 * streamed, as the request asks) or Anthropic Messages. Tests start it on loopback and
 * point the gateway at it, so the gateway's real HTTP client path runs. When the script
 * runs out it answers 500, which fails the run loudly. A step may be an async function, so
 * a test can hold the model's answer until it has looked at the run.
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
  private readonly routes: Array<{ match: RequestMatcher; script: ScriptStep[] }> = [];
  private server?: Server;
  private callCounter = 0;
  private readonly format: 'openai' | 'anthropic';

  constructor(options: ScriptedModelOptions = {}) {
    this.format = options.format ?? 'openai';
  }

  /** Adds replies to the end of the script. */
  enqueue(...steps: ScriptStep[]): this {
    this.script.push(...steps);
    return this;
  }

  /**
   * Answers the requests that `match` from a script of their own, in order, and leaves the
   * main script to the others: runs that talk to the model at the same time (a parent
   * and its sub-run, told apart by their first user message) each get their own answers.
   * The first route that matches a request answers it.
   */
  route(match: RequestMatcher, ...steps: ScriptStep[]): this {
    this.routes.push({ match, script: steps });
    return this;
  }

  /** Steps not used yet, the routes' included. */
  get remaining(): number {
    return this.script.length + this.routes.reduce((n, r) => n + r.script.length, 0);
  }

  /** Forgets the script, the routes and the recorded requests (between tests). */
  reset(): void {
    this.script.length = 0;
    this.routes.length = 0;
    this.requests.length = 0;
  }

  /**
   * Listens on `host` (loopback unless a test's gateway runs in a container: then the
   * address of that container network's bridge on this machine).
   */
  async start(host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    return `http://${host}:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  /** The text of a request's first user message: the input of the run that sent it. */
  /** Matches the requests of the run whose input (first user message) is `text`: how a sub-run's requests are told from its parent's. */
  static sentBy(text: string): (request: RecordedRequest) => boolean {
    return (request) => ScriptedModelServer.firstUserMessage(request) === text;
  }

  static firstUserMessage(request: RecordedRequest): string {
    const first = request.body.messages?.find((m) => m.role === 'user');
    if (!first) return '';
    // Anthropic content may be a list of blocks.
    const content = first.content as unknown;
    if (Array.isArray(content)) return content.map((b: { text?: string }) => b.text ?? '').join('');
    return typeof content === 'string' ? content : '';
  }

  /** The tool names a request offered, in either format. */
  static offeredTools(request: RecordedRequest): string[] {
    const tools = (request.body.tools ?? []) as Array<{ name?: string; function?: { name: string } }>;
    return tools.map((t) => t.function?.name ?? t.name ?? '').sort();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    if (req.url?.endsWith('/embeddings')) return this.handleEmbeddings(raw, res);
    const request: RecordedRequest = { path: req.url ?? '', headers: req.headers, body: JSON.parse(raw || '{}') };
    this.requests.push(request);
    const route = this.routes.find((r) => r.match(request));
    const step = (route ? route.script : this.script).shift();
    let reply: ScriptedReply;
    try {
      reply = step === undefined ? { status: 500, body: 'script exhausted' } : typeof step === 'function' ? await step(request) : step;
    } catch (err) {
      reply = { status: 500, body: `script step threw: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (res.destroyed) return;
    if ('status' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body ?? '{"error":{"message":"scripted failure"}}');
      return;
    }
    const toolCalls =
      'toolCalls' in reply
        ? reply.toolCalls.map((c) => ({
            id: c.id ?? `call_${++this.callCounter}`,
            name: c.name,
            arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
          }))
        : [];
    const content = reply.content ?? null;
    if (this.format === 'anthropic') return this.answerAnthropic(res, request, content, toolCalls);
    if (request.body.stream === true) return this.streamOpenAi(res, request, content, toolCalls);
    const body = {
      id: `chatcmpl-${this.requests.length}`,
      object: 'chat.completion',
      model: request.body.model,
      choices: [
        {
          index: 0,
          finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
          message: {
            role: 'assistant',
            content,
            ...(toolCalls.length ? { tool_calls: toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
          },
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  /** Chat-completion chunks: the text in three pieces, each tool call as a header then its arguments in two pieces. */
  private streamOpenAi(res: ServerResponse, request: RecordedRequest, content: string | null, toolCalls: Array<{ id: string; name: string; arguments: string }>): void {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      send({ id: `chatcmpl-${this.requests.length}`, object: 'chat.completion.chunk', model: request.body.model, choices: [{ index: 0, delta, finish_reason: finish }] });
    chunk({ role: 'assistant' });
    if (content) for (const piece of thirds(content)) chunk({ content: piece });
    toolCalls.forEach((c, index) => {
      chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
      const half = Math.ceil(c.arguments.length / 2);
      chunk({ tool_calls: [{ index, function: { arguments: c.arguments.slice(0, half) } }] });
      chunk({ tool_calls: [{ index, function: { arguments: c.arguments.slice(half) } }] });
    });
    chunk({}, toolCalls.length ? 'tool_calls' : 'stop');
    send({ id: `chatcmpl-${this.requests.length}`, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
    res.end('data: [DONE]\n\n');
  }

  private answerAnthropic(res: ServerResponse, request: RecordedRequest, content: string | null, toolCalls: Array<{ id: string; name: string; arguments: string }>): void {
    const blocks: unknown[] = [];
    if (content) blocks.push({ type: 'text', text: content });
    for (const c of toolCalls) blocks.push({ type: 'tool_use', id: c.id.replace(/^call_/, 'toolu_'), name: c.name, input: JSON.parse(c.arguments || '{}') });
    const body = {
      id: `msg_${this.requests.length}`,
      type: 'message',
      role: 'assistant',
      model: request.body.model,
      content: blocks,
      stop_reason: toolCalls.length ? 'tool_use' : 'end_turn',
      usage: { input_tokens: 12, output_tokens: 7 },
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

function thirds(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
