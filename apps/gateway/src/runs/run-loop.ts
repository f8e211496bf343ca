import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { ModelError, ModelMessage, MODEL_PROVIDER, ModelProvider, ModelResponse, ModelToolCall } from '../models/model-provider';
import { MessageView, SessionsRepository } from '../sessions/sessions.repository';
import { InvalidToolArgumentsError, ToolDispatcher, ToolInfrastructureError } from '../tools/tool-dispatcher';
import { ToolRegistry } from '../tools/tool-registry';
import { selectTools } from '../tools/tool-selection';
import { truncateOutput } from '../tools/truncate-output';
import { RunEventsService } from './run-events.service';
import { RunsRepository, RunView } from './runs.repository';

const MODEL_ATTEMPTS = 3;
const DEFAULT_MAX_OUTPUT_CHARS = 30_000;

/** Ends a run as failed with a message the client can read. */
class RunFailure extends Error {}

interface RunState {
  run: RunView;
  allowed: Set<string>;
  executorId: string | null;
  usage: { input_tokens: number; output_tokens: number; tool_calls: number; model_calls: number };
  started: number;
  signal: AbortSignal;
}

/**
 * The agent loop: model call → tool calls → results → model, until the model answers
 * without tools or something stops the run. Every message and event is stored as it
 * happens, so the history in Postgres is always the run's true state.
 */
@Injectable()
export class RunLoop {
  constructor(
    private readonly runs: RunsRepository,
    private readonly sessions: SessionsRepository,
    private readonly events: RunEventsService,
    private readonly registry: ToolRegistry,
    private readonly tools: ToolDispatcher,
    @Inject(MODEL_PROVIDER) private readonly model: ModelProvider,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Which tools the run's options allow (TOOLS.md order: toolset, enabled/disabled, allowlist). */
  allowedTools(run: RunView): Set<string> {
    const o = run.options;
    const names = selectTools({
      toolset: this.registry.toolset(o.toolset ?? 'default'),
      enabled: o.enabled,
      disabled: o.disabled,
      patterns: o.tools,
      known: new Set(this.registry.names()),
    });
    return new Set(names);
  }

  async execute(run: RunView, signal: AbortSignal = new AbortController().signal): Promise<void> {
    const log = this.logger.child({ tenantId: run.tenantId, runId: run.id, sessionId: run.sessionId });
    if (!(await this.runs.transition(run.tenantId, run.id, ['queued'], 'running'))) return;
    const session = await this.sessions.find(run.tenantId, run.sessionId);
    const state: RunState = {
      run,
      allowed: this.allowedTools(run),
      executorId: session?.executorId ?? null,
      usage: { input_tokens: 0, output_tokens: 0, tool_calls: 0, model_calls: 0 },
      started: Date.now(),
      signal,
    };
    await this.emit(run, 'run.started', { session_id: run.sessionId });
    try {
      await this.sessions.appendMessages(run.tenantId, run.sessionId, [{ runId: run.id, role: 'user', content: run.input }]);
      await this.emit(run, 'message.created', { role: 'user', content: run.input });
      const output = await this.loop(state);
      await this.runs.transition(run.tenantId, run.id, ['running'], 'completed', { output, usage: this.usage(state) });
      await this.emit(run, 'run.completed', { output, usage: this.usage(state) });
      log.info({ toolCalls: state.usage.tool_calls }, 'run completed');
    } catch (err) {
      const message = err instanceof RunFailure || err instanceof ModelError ? err.message : 'internal error while running';
      if (!(err instanceof RunFailure || err instanceof ModelError)) log.error({ err }, 'run crashed');
      if (await this.runs.transition(run.tenantId, run.id, ['running', 'requires_approval'], 'failed', { error: message, usage: this.usage(state) })) {
        await this.emit(run, 'run.failed', { error: message });
      }
      log.warn({ error: message }, 'run failed');
    }
  }

  private async loop(state: RunState): Promise<string> {
    const { run } = state;
    const toolSpecs = this.registry.manifest(state.allowed).map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
    for (;;) {
      const history = await this.sessions.listMessages(run.tenantId, run.sessionId);
      const response = await this.callModel(state, history, toolSpecs);
      await this.sessions.appendMessages(run.tenantId, run.sessionId, [
        { runId: run.id, role: 'assistant', content: response.content, toolCalls: response.toolCalls.length ? response.toolCalls : null },
      ]);
      await this.emit(run, 'message.created', {
        role: 'assistant',
        content: response.content,
        tool_calls: response.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
      });
      if (response.toolCalls.length === 0) return response.content ?? '';
      await this.runToolCalls(state, response.toolCalls);
    }
  }

  private async callModel(state: RunState, history: MessageView[], tools: Array<{ name: string; description: string; parameters: Record<string, unknown> }>): Promise<ModelResponse> {
    const model = state.run.options.model ?? this.config.RUNBOX_MODEL;
    if (!model) throw new RunFailure('no model given: set "model" on the run or RUNBOX_MODEL');
    const system = state.run.options.system ? this.expandSystem(state.run.options.system, tools) : undefined;
    let lastError: ModelError | undefined;
    for (let attempt = 1; attempt <= MODEL_ATTEMPTS; attempt++) {
      try {
        state.usage.model_calls++;
        const response = await this.model.complete({ model, system, messages: toModelMessages(history), tools, signal: state.signal });
        state.usage.input_tokens += response.usage.inputTokens;
        state.usage.output_tokens += response.usage.outputTokens;
        return response;
      } catch (err) {
        if (!(err instanceof ModelError) || !err.retryable || attempt === MODEL_ATTEMPTS) throw err;
        lastError = err;
        await delay(250 * 2 ** attempt);
      }
    }
    throw lastError ?? new RunFailure('the model call failed');
  }

  /** `{{tools}}` in the run's system text becomes the manifest of the tools it may use; nothing else is added. */
  private expandSystem(system: string, tools: Array<{ name: string; description: string }>): string {
    if (!system.includes('{{tools}}')) return system;
    const manifest = tools.map((t) => `- ${t.name}: ${t.description}`).join('\n');
    return system.split('{{tools}}').join(manifest);
  }

  /** Runs one turn's calls concurrently, except that calls on the same file run in order. */
  private async runToolCalls(state: RunState, calls: ModelToolCall[]): Promise<void> {
    const chains = new Map<string, Promise<void>>();
    const all: Array<Promise<void>> = [];
    for (const call of calls) {
      const key = this.orderingKey(call);
      const previous = chains.get(key) ?? Promise.resolve();
      const next = previous.then(() => this.runToolCall(state, call));
      chains.set(key, next.catch(() => undefined));
      all.push(next);
    }
    const results = await Promise.allSettled(all);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
  }

  private orderingKey(call: ModelToolCall): string {
    const pathArg = this.registry.get(call.name)?.pathArgument;
    if (!pathArg) return `call:${call.id}`;
    try {
      const args = JSON.parse(call.arguments) as Record<string, unknown>;
      const path = typeof args[pathArg] === 'string' ? (args[pathArg] as string) : '';
      return `file:${path.replace(/^\/workspace\/?/, '').replace(/^\.\//, '').replace(/\/+/g, '/')}`;
    } catch {
      return `call:${call.id}`;
    }
  }

  private async runToolCall(state: RunState, call: ModelToolCall): Promise<void> {
    const { run } = state;
    state.usage.tool_calls++;
    await this.runs.recordToolCall(run.tenantId, { runId: run.id, sessionId: run.sessionId, callId: call.id, name: call.name, arguments: safeJson(call.arguments), status: 'running' });
    await this.emit(run, 'tool_call.started', { tool_call_id: call.id, name: call.name, arguments: call.arguments });
    const result = await this.toolResult(state, call);
    const maxChars = run.options.limits?.max_output_chars ?? DEFAULT_MAX_OUTPUT_CHARS;
    const output = truncateOutput(result.output, maxChars);
    await this.runs.finishToolCall(run.tenantId, run.id, call.id, { status: result.is_error ? 'failed' : 'completed', output, isError: result.is_error, metadata: result.metadata });
    await this.sessions.appendMessages(run.tenantId, run.sessionId, [{ runId: run.id, role: 'tool', content: output, toolCallId: call.id }]);
    await this.emit(run, 'tool_call.completed', { tool_call_id: call.id, name: call.name, output, is_error: result.is_error, metadata: result.metadata });
  }

  private async toolResult(state: RunState, call: ModelToolCall): Promise<{ output: string; metadata: Record<string, unknown>; is_error: boolean }> {
    const { run } = state;
    if (!state.allowed.has(call.name)) {
      const offered = [...state.allowed].join(', ') || 'none';
      return refusal(`tool ${call.name} is not available in this run; the tools you can call are: ${offered}`);
    }
    let args: unknown;
    try {
      args = JSON.parse(call.arguments || '{}');
    } catch {
      return refusal(`the arguments for ${call.name} are not valid JSON; send a JSON object`);
    }
    try {
      const result = await this.tools.execute(
        {
          tenantId: run.tenantId,
          sessionId: run.sessionId,
          executorId: state.executorId,
          callId: `${run.id}:${call.id}`,
          runId: run.id,
          memoryScope: run.options.memory_scope ?? null,
          signal: state.signal,
          maxOutputChars: run.options.limits?.max_output_chars,
          timeouts: run.options.limits?.timeouts,
        },
        call.name,
        args,
      );
      if (result.executorId) state.executorId = result.executorId;
      return result;
    } catch (err) {
      if (err instanceof InvalidToolArgumentsError) return refusal(err.message);
      if (err instanceof ToolInfrastructureError) throw new RunFailure(`tool ${call.name} could not run: ${err.message}`);
      throw err;
    }
  }

  private usage(state: RunState): Record<string, number> {
    return { ...state.usage, wall_ms: Date.now() - state.started };
  }

  private emit(run: RunView, type: string, data: Record<string, unknown>): Promise<number> {
    return this.events.emit(run.tenantId, run.id, type, data);
  }
}

function refusal(output: string) {
  return { output, metadata: {}, is_error: true };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { _raw: text };
  }
}

export function toModelMessages(history: MessageView[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of history) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content ?? '' });
    else if (m.role === 'assistant') out.push({ role: 'assistant', content: m.content, toolCalls: m.toolCalls ?? undefined });
    else if (m.role === 'tool' && m.toolCallId) out.push({ role: 'tool', toolCallId: m.toolCallId, content: m.content ?? '' });
  }
  return out;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
