import { Controller, Delete, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { metadataSchema } from '../common/metadata';
import { TenantId } from '../common/request-context';
import { PathId, ValidBody, ValidParam, ValidQuery } from '../common/validation/request-parts';
import { sessionBackendSchema } from '../servers/servers.schemas';
import { SshSessionBackends } from '../servers/ssh-session-backends';
import { MessageView, SessionView } from './sessions.repository';
import { createdSessionSchema, messageListSchema, messageSchema, sessionListSchema, sessionSchema, toolResultSchema } from './sessions.responses';
import { SessionsService } from './sessions.service';

const createSessionSchema = z.object({ metadata: metadataSchema.optional(), backend: sessionBackendSchema.optional() }).strict();
const toolCallSchema = z.object({ arguments: z.record(z.string(), z.unknown()).default({}) }).strict();
/** `include_children=true` adds the messages of sub-runs (delegate_task), each marked by its run_id. */
const messagesQuerySchema = z.object({ include_children: z.enum(['true', 'false']).optional() }).strict();
const listQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    /** The previous page's `next_cursor`. */
    cursor: z.string().min(1).max(512).optional(),
  })
  .strict();
// Built-in names are lower case; tenant-added ones (`petstore__getPet`) are what providers accept.
const toolNameSchema = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$/, 'a tool name');

@Controller('v1/sessions')
@UseGuards(ApiKeyGuard)
export class SessionsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly sshBackends: SshSessionBackends,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create a session (its sandbox starts with its first tool call)', response: createdSessionSchema, errors: [ErrorCode.QuotaExceeded] })
  async create(@TenantId() tenantId: string, @ValidBody(createSessionSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof createSessionSchema>) {
    const server = input.backend ? await this.sshBackends.resolveForNewSession(tenantId, input.backend.server) : undefined;
    const session = await this.sessions.create(tenantId, input.metadata ?? {});
    if (server) await this.sshBackends.bind(tenantId, session.id, server);
    const backend = server ? { backend: { type: 'ssh', server: server.name } } : {};
    return { id: session.id, status: session.status, metadata: session.metadata, created_at: session.createdAt.toISOString(), ...backend };
  }

  /** The tenant's live sessions, newest first, a page at a time. */
  @Get()
  @ApiOperation({ summary: 'List sessions, newest first (paginated with cursor)', response: sessionListSchema })
  async list(@TenantId() tenantId: string, @ValidQuery(listQuerySchema) q: z.output<typeof listQuerySchema>) {
    const page = await this.sessions.list(tenantId, q.limit, q.cursor);
    const data = await Promise.all(page.sessions.map((session) => this.view(tenantId, session)));
    return { data, next_cursor: page.nextCursor };
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a session and the state of its sandbox', response: sessionSchema })
  async get(@TenantId() tenantId: string, @PathId('session') sessionId: string) {
    return this.view(tenantId, await this.sessions.get(tenantId, sessionId));
  }

  private async view(tenantId: string, session: SessionView) {
    const backend = await this.sshBackends.describe(tenantId, session.id);
    return { ...sessionJson(session), ...(backend ? { backend } : {}) };
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a session: its runs are cancelled and its sandbox removed' })
  async delete(@TenantId() tenantId: string, @PathId('session') sessionId: string): Promise<void> {
    await this.sessions.delete(tenantId, sessionId);
  }

  @Get(':id/messages')
  @ApiOperation({ summary: "The session's messages, oldest first", response: messageListSchema })
  async messages(@TenantId() tenantId: string, @PathId('session') sessionId: string, @ValidQuery(messagesQuerySchema) q: z.output<typeof messagesQuerySchema>) {
    const messages = await this.sessions.messages(tenantId, sessionId, { includeSubRuns: q.include_children === 'true' });
    return { data: messages.map(messageJson) };
  }

  @Post(':id/tools/:name')
  @HttpCode(200)
  @ApiOperation({
    summary: "Run one tool in the session's sandbox, with no model",
    response: toolResultSchema,
    errors: [ErrorCode.QuotaExceeded, ErrorCode.ExecutorUnavailable, ErrorCode.ExecutorLost, ErrorCode.SandboxFailed],
  })
  async runTool(
    @TenantId() tenantId: string,
    @PathId('session') sessionId: string,
    @ValidParam('name', toolNameSchema) tool: string,
    @ValidBody(toolCallSchema, { absent: {}, nullIsAbsent: true }) input: z.output<typeof toolCallSchema>,
  ) {
    return this.sessions.runTool(tenantId, sessionId, tool, input.arguments);
  }
}

function sessionJson(s: SessionView): z.output<typeof sessionSchema> {
  return { id: s.id, status: s.status, metadata: s.metadata, created_at: s.createdAt.toISOString(), sandbox: { state: s.sandboxState } };
}

export function messageJson(m: MessageView): z.output<typeof messageSchema> {
  return {
    id: m.id,
    run_id: m.runId,
    role: m.role,
    content: m.content,
    ...(m.toolCalls ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
    ...(m.toolCallId ? { tool_call_id: m.toolCallId } : {}),
    created_at: m.createdAt.toISOString(),
  };
}
