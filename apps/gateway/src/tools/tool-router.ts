import { Inject, Injectable, Optional } from '@nestjs/common';
import { isDatabaseUnavailable } from '@app/persistence';
import { SANDBOX_STARTING, ToolResult } from '@app/contracts';
import { randomUUID } from 'node:crypto';
import { toStorableText } from '../common/storable-text';
import { ExecutorClient, ExecutorLostError, ExecutorUnavailableError } from './executor.client';
import { GatewayToolResult } from './gateway-tool';
import { SESSION_TOOL_ROUTER, SessionToolRouter } from './session-tool-router';
import { TenantTool } from './tenant-tool';
import { TenantTools } from './tenant-tools';
import { ToolDefinition } from './tool-definition';
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
  /** The tenant-added tools a run was offered; direct calls look them up when called. */
  tenantTools?: ReadonlyMap<string, TenantTool>;
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
    /** The session's executor, when its loss is why (see ExecutorUnavailableError). */
    readonly lostExecutorId?: string,
  ) {
    super(message);
  }
}

/**
 * The call never left for its sandbox: the database (the gateway's, or the executor's) was
 * away while it was being routed. Nothing ran, so it may be sent again once it is back.
 */
export class ToolNotDispatchedError extends ToolInfrastructureError {
  constructor(message: string) {
    super(message, 'executor_unavailable');
  }
}

/** When a call refused because its sandbox was still starting may be sent again. */
const SANDBOX_STARTING_RETRY_SECONDS = 5;

/** What an executor's error reply to a sandbox call means to its caller. */
export function executorRefusal(error: { code: string; message: string }): ToolInfrastructureError {
  if (error.code === 'unavailable') return new ToolNotDispatchedError(error.message);
  // Nothing ran, and the sandbox goes on starting on that executor: the same call can work
  // shortly. It is not sent again here: a session's first call would be placed afresh, and
  // could start a second sandbox on another executor.
  if (error.code === SANDBOX_STARTING) return new ToolInfrastructureError(error.message, 'executor_unavailable', false, SANDBOX_STARTING_RETRY_SECONDS);
  const kind = error.code === 'not_found' || error.code === 'quota_exceeded' ? error.code : 'sandbox_failed';
  return new ToolInfrastructureError(error.message, kind);
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
    @Optional() private readonly tenantTools?: TenantTools,
  ) {}

  /**
   * Validates arguments; throws InvalidToolArgumentsError naming each bad field. `definition`
   * is for tools the registry does not hold (a tenant's).
   */
  parseArguments(name: string, args: unknown, definition?: ToolDefinition): Record<string, unknown> {
    const tool = definition ?? this.registry.get(name);
    if (!tool) throw new UnknownToolError(`unknown tool ${name}`);
    const parsed = tool.parameters.safeParse(args ?? {});
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${['arguments', ...i.path.map(String)].join('.')}: ${i.message}`);
      throw new InvalidToolArgumentsError(`invalid arguments for ${name}: ${problems.join('; ')}`);
    }
    return parsed.data;
  }

  async execute(ctx: ToolContext, name: string, rawArgs: unknown): Promise<ToolResult & { executorId?: string }> {
    const tenantTool = this.registry.get(name) ? undefined : await this.tenantTool(ctx, name);
    if (tenantTool) return this.executeTenantTool(ctx, tenantTool, rawArgs);
    const tool = this.registry.get(name);
    if (!tool) throw new UnknownToolError(`unknown tool ${name}`);
    const args = this.parseArguments(name, rawArgs);
    const maxOutputChars = ctx.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
    const timeoutSeconds = toolTimeLimitSeconds(name, tool, args, ctx.timeouts);
    if (tool.runsIn === 'gateway') return this.executeInGateway(ctx, name, args, maxOutputChars, timeoutSeconds);
    const routed = await this.sessionRouter?.route({ tenantId: ctx.tenantId, sessionId: ctx.sessionId, tool: name, args, timeoutSeconds, maxOutputChars }).catch((err: unknown) => {
      if (isDatabaseUnavailable(err)) throw new ToolNotDispatchedError('the database is unavailable; nothing ran');
      throw err;
    });
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
      if (err instanceof ExecutorUnavailableError) throw new ToolInfrastructureError(err.message, 'executor_unavailable', err.outcomeUnknown, err.retryAfterSeconds, err.lostExecutorId);
      if (err instanceof ExecutorLostError) throw new ToolInfrastructureError(err.message, 'executor_lost');
      throw err;
    }
    if (!reply.ok) throw executorRefusal(reply.error);
    // The agent applied the budget (and spilled what was too large in bytes); this only
    // catches a sandbox that did not, and never cuts the agent's notes. What a program
    // printed may hold NUL bytes, which no text column can store.
    return { ...reply.result, output: toStorableText(enforceOutputBudget(reply.result.output, maxOutputChars)), executorId: reply.executor_id };
  }

  /** A run passes what it was offered; a direct call looks the name up among the tenant's tools. */
  private async tenantTool(ctx: ToolContext, name: string): Promise<TenantTool | undefined> {
    if (ctx.tenantTools) return ctx.tenantTools.get(name);
    return this.tenantTools?.find(ctx.tenantId, name, { sessionId: ctx.sessionId, signal: ctx.signal });
  }

  /** A tenant-added tool runs in the gateway; its result says which server or service it came from. */
  private async executeTenantTool(ctx: ToolContext, tool: TenantTool, rawArgs: unknown): Promise<GatewayToolResult> {
    const { name } = tool.definition;
    const args = this.parseArguments(name, rawArgs, tool.definition);
    const maxOutputChars = ctx.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
    const timeoutSeconds = toolTimeLimitSeconds(name, tool.definition, args, ctx.timeouts);
    const result = await tool.execute({ ...ctx, maxOutputChars, timeoutMs: timeoutSeconds * 1000 }, args);
    return {
      ...result,
      metadata: { ...result.metadata, origin: tool.origin },
      output: toStorableText(applyOutputBudget(result.output, maxOutputChars)),
    };
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
