import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { pathId } from '../common/ids';
import { emptyBodySchema, noQuerySchema } from '../common/metadata';
import { ApiKeyId, TenantId } from '../common/request-context';
import { validate } from '../common/validate';
import { RunControlService } from './run-control.service';
import { isTerminal } from './run-status';
import { RunEventsService } from './run-events.service';
import { approvalSchema, createRunSchema } from './run-options';
import { RunView } from './runs.repository';
import { RunTools, runToolsJson, RunToolSelection } from './run-tools';
import { RunsService } from './runs.service';
import { ToolCallView } from './tool-calls.repository';

const TERMINAL_EVENTS = new Set(['run.completed', 'run.failed', 'run.cancelled']);
const KEEPALIVE_MS = 15_000;

const listQuerySchema = z
  .object({
    session_id: z.string().min(1).max(64).optional(),
    /** Only the sub-runs of this run. */
    parent_run_id: z.string().min(1).max(64).optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();
const idempotencyKeySchema = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces').optional();
const lastEventIdSchema = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional();
/** `last_event_id` is the Last-Event-ID header for clients (EventSource) that cannot set it. */
const eventsQuerySchema = z.object({ last_event_id: lastEventIdSchema }).strict();

@Controller('v1/runs')
@UseGuards(ApiKeyGuard)
export class RunsController {
  constructor(
    private readonly runs: RunsService,
    private readonly control: RunControlService,
    private readonly events: RunEventsService,
    private readonly toolSelection: RunToolSelection,
  ) {}

  private json(run: RunView) {
    return runJson(run, this.toolSelection.forRun(run));
  }

  @Post()
  @HttpCode(202)
  async create(
    @TenantId() tenantId: string,
    @ApiKeyId() apiKeyId: string,
    @Body() body: unknown,
    @Query() query: unknown,
    @Res({ passthrough: true }) res: Response,
    @Headers('idempotency-key') idempotencyKey?: string,
  ) {
    validate(noQuerySchema, query, 'query');
    const input = validate(createRunSchema, body, 'body');
    const key = validate(idempotencyKeySchema, idempotencyKey, 'header.idempotency-key');
    const { run, created } = await this.runs.create(tenantId, input, key, apiKeyId);
    if (!created) res.setHeader('idempotent-replayed', 'true');
    return this.json(run);
  }

  @Get()
  async list(@TenantId() tenantId: string, @Query() query: unknown) {
    const q = validate(listQuerySchema, query, 'query');
    const runs = await this.runs.list(tenantId, q.session_id, q.limit, q.parent_run_id);
    return { data: runs.map((run) => this.json(run)) };
  }

  @Get(':id')
  async get(@TenantId() tenantId: string, @Param('id') id: string, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const run = await this.runs.get(tenantId, pathId('run', id));
    const pending = run.status === 'requires_approval' ? await this.runs.pendingApprovals(tenantId, run.id) : [];
    return { ...this.json(run), pending_approvals: pending.map(pendingJson) };
  }

  @Post(':id/cancel')
  @HttpCode(200)
  async cancel(@TenantId() tenantId: string, @Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    // No body at all is the same as {}; a JSON null, array or any field is refused.
    validate(emptyBodySchema, body === undefined ? {} : body, 'body');
    const run = await this.control.cancel(tenantId, pathId('run', id));
    return this.json(run);
  }

  @Post(':id/approvals')
  @HttpCode(200)
  async approve(@TenantId() tenantId: string, @Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    validate(noQuerySchema, query, 'query');
    const runId = pathId('run', id);
    const input = validate(approvalSchema, body, 'body');
    const { run, callRunId } = await this.control.decide(tenantId, runId, input);
    return { ...this.json(run), tool_call_id: input.tool_call_id, tool_call_run_id: callRunId, decision: input.decision };
  }

  /**
   * Server-sent events: every stored event after Last-Event-ID, then live ones until the
   * run's terminal event. Events come from Postgres, so a late or reconnecting client gets
   * the whole run; a NATS notice only wakes the stream early.
   */
  @Get(':id/events')
  async stream(
    @TenantId() tenantId: string,
    @Param('id') id: string,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Query() query: unknown,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const runId = pathId('run', id);
    const fromHeader = validate(lastEventIdSchema, lastEventId, 'header.last-event-id');
    const fromQuery = validate(eventsQuerySchema, query, 'query').last_event_id;
    let after = fromHeader ?? fromQuery ?? 0;
    await this.runs.get(tenantId, runId);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.flushHeaders();

    let closed = false;
    let ended = false;
    let wake: () => void = () => undefined;
    req.on('close', () => {
      closed = true;
      wake();
    });
    const subscription = this.events.watch(runId, () => wake());
    try {
      while (!closed) {
        const batch = await this.events.after(tenantId, runId, after);
        let finished = false;
        for (const event of batch) {
          res.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`);
          after = event.seq;
          if (TERMINAL_EVENTS.has(event.type)) finished = true;
        }
        if (finished) break;
        if (batch.length > 0) continue;
        // Resumed at or past the terminal event: nothing more will come. The run may have
        // ended just after the read above, so its events are read once more before closing.
        if (ended) break;
        if (isTerminal((await this.runs.get(tenantId, runId)).status)) {
          ended = true;
          continue;
        }
        const notified = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), KEEPALIVE_MS);
          wake = () => {
            clearTimeout(timer);
            resolve(true);
          };
        });
        if (!notified && !closed) res.write(': keepalive\n\n');
      }
    } finally {
      subscription.unsubscribe();
      res.end();
    }
  }
}

function pendingJson(call: ToolCallView) {
  return { tool_call_id: call.callId, run_id: call.runId, name: call.name, arguments: call.arguments, reason: call.reason, expires_at: call.expiresAt?.toISOString() ?? null };
}

export function runJson(run: RunView, tools: Pick<RunTools, 'tools' | 'dropped'>) {
  return {
    id: run.id,
    session_id: run.sessionId,
    parent_run_id: run.parentRunId,
    parent_tool_call_id: run.parentCallId,
    depth: run.depth,
    status: run.status,
    output: run.output,
    error: run.error,
    usage: run.usage,
    options: effectiveOptionsJson(run.options),
    option_sources: run.optionSources ?? {},
    ...runToolsJson(tools),
    created_at: run.createdAt.toISOString(),
    started_at: run.startedAt?.toISOString() ?? null,
    completed_at: run.completedAt?.toISOString() ?? null,
  };
}

/** The options that govern a run (after saved defaults), as the run object shows them. */
function effectiveOptionsJson(options: RunView['options']) {
  const { toolset, tools, enabled, disabled, approval_mode, permissions, limits, model, memory_scope } = options;
  return { toolset, tools, enabled, disabled, approval_mode, permissions, limits, model, memory_scope };
}
