import { Controller, Get, HttpCode, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { emptyBodySchema } from '../common/metadata';
import { ApiKeyId, RequestId, TenantId } from '../common/request-context';
import { PathId, ValidBody, ValidHeader, ValidQuery } from '../common/validation/request-parts';
import { RunControlService } from './run-control.service';
import { RunEventStream } from './run-event-stream';
import { ApprovalInput, approvalSchema, CreateRunInput, createRunSchema } from './run-options';
import { RunView } from './runs.repository';
import { RunTools, runToolsJson, RunToolSelection } from './run-tools';
import { RunsService } from './runs.service';
import { approvalAnswerSchema, pendingApprovalSchema, runDetailSchema, runEventsContent, RunJson, runListSchema, runSchema } from './runs.responses';
import { ToolCallView } from './tool-calls.repository';

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
    private readonly eventStream: RunEventStream,
    private readonly toolSelection: RunToolSelection,
  ) {}

  private json(run: RunView) {
    return runJson(run, this.toolSelection.forRun(run));
  }

  @Post()
  @HttpCode(202)
  @ApiOperation({
    summary: 'Start a run: queued at once, executed by the agent loop (202)',
    description: 'Without session_id a new session is made. An Idempotency-Key header makes a repeated POST answer the first run (with Idempotent-Replayed: true).',
    response: runSchema,
    errors: [ErrorCode.Conflict, ErrorCode.RateLimited, ErrorCode.QuotaExceeded],
  })
  async create(
    @TenantId() tenantId: string,
    @ApiKeyId() apiKeyId: string,
    @ValidBody(createRunSchema) input: CreateRunInput,
    @ValidHeader('idempotency-key', idempotencyKeySchema) key: string | undefined,
    @RequestId() requestId: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ) {
    const { run, created } = await this.runs.create(tenantId, input, { idempotencyKey: key, apiKeyId, requestId });
    if (!created) res.setHeader('idempotent-replayed', 'true');
    return this.json(run);
  }

  @Get()
  @ApiOperation({ summary: 'List runs, newest first', response: runListSchema })
  async list(@TenantId() tenantId: string, @ValidQuery(listQuerySchema) q: z.output<typeof listQuerySchema>) {
    const runs = await this.runs.list(tenantId, q.session_id, q.limit, q.parent_run_id);
    return { data: runs.map((run) => this.json(run)) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a run, with the tool calls waiting for approval', response: runDetailSchema })
  async get(@TenantId() tenantId: string, @PathId('run') runId: string) {
    const run = await this.runs.get(tenantId, runId);
    const pending = run.status === 'requires_approval' ? await this.runs.pendingApprovals(tenantId, run.id) : [];
    return { ...this.json(run), pending_approvals: pending.map(pendingJson) };
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @ApiOperation({ summary: 'Cancel a queued, running or waiting run (and its sub-runs)', response: runSchema, errors: [ErrorCode.Conflict] })
  // No body at all is the same as {}; a JSON null, array or any field is refused.
  async cancel(@TenantId() tenantId: string, @PathId('run') runId: string, @ValidBody(emptyBodySchema, { absent: {} }) _body: object) {
    const run = await this.control.cancel(tenantId, runId);
    return this.json(run);
  }

  @Post(':id/approvals')
  @HttpCode(200)
  @ApiOperation({ summary: 'Approve or deny a tool call waiting for a decision', response: approvalAnswerSchema, errors: [ErrorCode.Conflict] })
  async approve(@TenantId() tenantId: string, @PathId('run') runId: string, @ValidBody(approvalSchema) input: ApprovalInput) {
    const { run, callRunId } = await this.control.decide(tenantId, runId, input);
    return { ...this.json(run), tool_call_id: input.tool_call_id, tool_call_run_id: callRunId, decision: input.decision };
  }

  /** Server-sent events from Last-Event-ID (or `last_event_id`) on: see RunEventStream. */
  @Get(':id/events')
  @ApiOperation({
    summary: "Stream a run's events (server-sent events), from Last-Event-ID (or last_event_id) on",
    description: 'Stored events first, then live ones; the stream ends after the terminal event. A comment line (`: keepalive`) is sent when nothing happened for 15 s.',
    response: runEventsContent,
  })
  async stream(
    @TenantId() tenantId: string,
    @PathId('run') runId: string,
    @ValidHeader('last-event-id', lastEventIdSchema) fromHeader: number | undefined,
    @ValidQuery(eventsQuerySchema) query: z.output<typeof eventsQuerySchema>,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    await this.eventStream.send(tenantId, runId, fromHeader ?? query.last_event_id ?? 0, req, res);
  }
}

function pendingJson(call: ToolCallView): z.output<typeof pendingApprovalSchema> {
  return { tool_call_id: call.callId, run_id: call.runId, name: call.name, arguments: call.arguments, reason: call.reason, expires_at: call.expiresAt?.toISOString() ?? null };
}

export function runJson(run: RunView, tools: Pick<RunTools, 'tools' | 'dropped'>): RunJson {
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
