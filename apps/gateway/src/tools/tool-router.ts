import { Inject, Injectable, Optional } from '@nestjs/common';
import { ToolResult } from '@app/contracts';
import { randomUUID } from 'node:crypto';
import { toStorableText } from '../common/storable-text';
import { ExecutorClient, ExecutorLostError, ExecutorUnavailableError } from './executor.client';
import { GatewayToolResult } from './gateway-tool';
import { SESSION_TOOL_ROUTER, SessionToolRouter } from './session-tool-router';
import { ToolRegistry } from './tool-registry';
import { applyOutputBudget, enforceOutputBudget } from './output-budget';
import { toolTimeLimitSeconds } from './tool-time-limit';

export const DEFAULT_MAX_OUTPUT_CHARS = 30_000;

export interface ToolContext {
  tenantId: string;
  sessionId: string;
  /** The executor the session's sandbox lives on, once it has one. */
  executorId: string | null;
  callId?: string;
  /** The model's id for the call, unique within its run. */
  toolCallId?: string;
  /** The run making the call; absent for direct calls (POST /v1/sessions/{id}/tools/{name}). */
  runId?: string;
  /** The run's `memory_scope`: narrows which memories the memory tool sees and where it saves. */
  memoryScope?: string | null;
  maxOutputChars?: number;
  /** Per-tool timeouts in seconds (a run's `limits.timeouts`): the default, and a ceiling on what the model asks for. */
  timeouts?: Record<string, number>;
  /** Aborted when the run is cancelled; tools that run in the gateway (rag_index) stop on it. */
  signal?: AbortSignal;
}

/** An infrastructure failure (not the tool's own error): the caller cannot go on normally. */
export class ToolInfrastructureError extends Error {
  constructor(
    message: string,
    readonly kind: 'executor_unavailable' | 'executor_lost' | 'sandbox_failed' | 'not_found' | 'quota_exceeded',
    /** An executor took the call but never answered: it may or may not have run. */
    readonly outcomeUnknown = false,
    /** Set when the same call may work later (an executor restarting, none with room). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export class UnknownToolError extends Error {}

export class InvalidToolArgumentsError extends Error {}

/** Runs one tool call wherever that tool lives, validating its arguments first. */
@Injectable()
export class ToolRouter {
  constructor(
    private readonly registry: ToolRegistry,
    private readonly executor: ExecutorClient,
    @Optional() @Inject(SESSION_TOOL_ROUTER) private readonly sessionRouter?: SessionToolRouter,
  ) {}

  /** Validates arguments; throws InvalidToolArgumentsError naming each bad field. */
  parseArguments(name: string, args: unknown): Record<string, unknown> {
    const tool = this.registry.get(name);
    if (!tool) throw new UnknownToolError(`unknown tool ${name}`);
    const parsed = tool.parameters.safeParse(args ?? {});
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${['arguments', ...i.path.map(String)].join('.')}: ${i.message}`);
      throw new InvalidToolArgumentsError(`invalid arguments for ${name}: ${problems.join('; ')}`);
    }
    return parsed.data;
  }

  async execute(ctx: ToolContext, name: string, rawArgs: unknown): Promise<ToolResult & { executorId?: string }> {
    const tool = this.registry.get(name);
    if (!tool) throw new UnknownToolError(`unknown tool ${name}`);
    const args = this.parseArguments(name, rawArgs);
    const maxOutputChars = ctx.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
    const timeoutSeconds = toolTimeLimitSeconds(name, tool, args, ctx.timeouts);
    if (tool.runsIn === 'gateway') return this.executeInGateway(ctx, name, args, maxOutputChars, timeoutSeconds);
    const routed = await this.sessionRouter?.route({ tenantId: ctx.tenantId, sessionId: ctx.sessionId, tool: name, args, timeoutSeconds, maxOutputChars });
    // A remote server's output: the budget is applied here, where the result is produced.
    if (routed) return { ...routed, output: toStorableText(applyOutputBudget(routed.output, maxOutputChars)) };
    let reply;
    try {
      reply = await this.executor.callTool(
        {
          tenant_id: ctx.tenantId,
          session_id: ctx.sessionId,
          call_id: ctx.callId ?? randomUUID(),
          tool: name,
          arguments: name === 'terminal' ? { ...args, timeout_seconds: timeoutSeconds } : args,
          max_output_chars: maxOutputChars,
          timeout_ms: timeoutSeconds * 1000,
        },
        ctx.executorId,
      );
    } catch (err) {
      if (err instanceof ExecutorUnavailableError) throw new ToolInfrastructureError(err.message, 'executor_unavailable', err.outcomeUnknown, err.retryAfterSeconds);
      if (err instanceof ExecutorLostError) throw new ToolInfrastructureError(err.message, 'executor_lost');
      throw err;
    }
    if (!reply.ok) {
      const kind = reply.error.code === 'not_found' || reply.error.code === 'quota_exceeded' ? reply.error.code : 'sandbox_failed';
      throw new ToolInfrastructureError(reply.error.message, kind);
    }
    // The agent applied the budget (and spilled what was too large in bytes); this only
    // catches a sandbox that did not, and never cuts the agent's notes. What a program
    // printed may hold NUL bytes, which no text column can store.
    return { ...reply.result, output: toStorableText(enforceOutputBudget(reply.result.output, maxOutputChars)), executorId: reply.executor_id };
  }

  private async executeInGateway(
    ctx: ToolContext,
    name: string,
    args: Record<string, unknown>,
    maxOutputChars: number,
    timeoutSeconds: number,
  ): Promise<GatewayToolResult> {
    const runner = this.registry.gatewayTool(name);
    if (!runner) throw new UnknownToolError(`tool ${name} has no runner in this gateway`);
    const result = await runner.execute({ ...ctx, maxOutputChars, timeoutMs: timeoutSeconds * 1000 }, args);
    return { ...result, output: toStorableText(applyOutputBudget(result.output, maxOutputChars)) };
  }
}
