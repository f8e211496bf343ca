import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { AppError, ErrorCode } from '@app/errors';
import { CredentialCipher } from '@app/ssh';
import { McpServerChanges, McpServerNameTakenError, McpServerRow, McpServersRepository } from './mcp-servers.repository';
import { CreateMcpServerInput, UpdateMcpServerInput } from './mcp-servers.schemas';
import { McpSecrets, sealMcpSecrets } from './mcp-secrets';
import { McpToolSource } from './mcp-tool-source';

/** What the API shows of a server: header and environment names, never their values. */
export interface McpServerView {
  id: string;
  name: string;
  transport: 'streamable_http' | 'stdio';
  url?: string;
  header_names?: string[];
  command?: string;
  args?: string[];
  env_names?: string[];
  status: McpServerRow['status'];
  last_error: string | null;
  last_error_at: string | null;
  last_success_at: string | null;
  created_at: string;
  updated_at: string;
}

/** The tenant's MCP servers: CRUD with sealed headers and environment. */
@Injectable()
export class McpServersService {
  private readonly cipher: CredentialCipher | undefined;

  constructor(
    private readonly servers: McpServersRepository,
    private readonly source: McpToolSource,
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
  ) {
    this.cipher = config.RUNBOX_CREDENTIALS_KEY ? new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS) : undefined;
  }

  async create(tenantId: string, input: CreateMcpServerInput): Promise<McpServerView> {
    const secrets: McpSecrets = input.transport === 'stdio' ? { headers: {}, env: input.env ?? {} } : { headers: input.headers ?? {}, env: {} };
    this.requireCipherFor(secrets);
    try {
      const row = await this.servers.create(tenantId, {
        name: input.name,
        transport: input.transport,
        url: input.transport === 'streamable_http' ? input.url : null,
        command: input.transport === 'stdio' ? input.command : null,
        args: input.transport === 'stdio' ? (input.args ?? []) : [],
        headerNames: Object.keys(secrets.headers),
        envNames: Object.keys(secrets.env),
        sealSecrets: (id) => (this.cipher ? sealMcpSecrets(this.cipher, tenantId, id, secrets) : null),
      });
      return viewOf(row);
    } catch (err) {
      throw conflict(err);
    }
  }

  async list(tenantId: string): Promise<McpServerView[]> {
    return (await this.servers.list(tenantId)).map(viewOf);
  }

  async get(tenantId: string, id: string): Promise<McpServerView> {
    return viewOf(await this.require(tenantId, id));
  }

  /** Fields of the other transport are refused; new headers or env replace the stored ones whole. */
  async update(tenantId: string, id: string, input: UpdateMcpServerInput): Promise<McpServerView> {
    const current = await this.require(tenantId, id);
    const wrong = current.transport === 'stdio' ? (['url', 'headers'] as const) : (['command', 'args', 'env'] as const);
    const misplaced = wrong.filter((field) => input[field] !== undefined);
    if (misplaced.length > 0) throw AppError.validation(`${misplaced.join(', ')}: not a field of a ${current.transport} server (the transport cannot change)`);
    const changes: McpServerChanges = {};
    if (input.name !== undefined) changes.name = input.name;
    if (input.url !== undefined) changes.url = input.url;
    if (input.command !== undefined) changes.command = input.command;
    if (input.args !== undefined) changes.args = input.args;
    if (input.headers !== undefined || input.env !== undefined) {
      const secrets: McpSecrets = { headers: input.headers ?? {}, env: input.env ?? {} };
      this.requireCipherFor(secrets);
      changes.secrets = this.cipher ? sealMcpSecrets(this.cipher, tenantId, id, secrets) : null;
      if (input.headers !== undefined) changes.headerNames = Object.keys(secrets.headers);
      if (input.env !== undefined) changes.envNames = Object.keys(secrets.env);
    }
    const row = await this.servers.update(tenantId, id, changes).catch((err: unknown) => Promise.reject(conflict(err)));
    if (!row) throw AppError.notFound('MCP server', id);
    await this.source.forget(tenantId, id);
    return viewOf(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.servers.delete(tenantId, id))) throw AppError.notFound('MCP server', id);
    await this.source.forget(tenantId, id);
  }

  private async require(tenantId: string, id: string): Promise<McpServerRow> {
    const row = await this.servers.get(tenantId, id);
    if (!row) throw AppError.notFound('MCP server', id);
    return row;
  }

  /** Header and environment values are stored sealed only: without the key they cannot be taken. */
  private requireCipherFor(secrets: McpSecrets): void {
    if (this.cipher || (Object.keys(secrets.headers).length === 0 && Object.keys(secrets.env).length === 0)) return;
    throw new AppError(ErrorCode.Unavailable, 'MCP server headers and env are stored encrypted with RUNBOX_CREDENTIALS_KEY, which the operator has not set');
  }
}

export function viewOf(row: McpServerRow): McpServerView {
  const endpoint =
    row.transport === 'stdio'
      ? { command: row.command ?? '', args: row.args, env_names: row.envNames }
      : { url: row.url ?? '', header_names: row.headerNames };
  return {
    id: row.id,
    name: row.name,
    transport: row.transport,
    ...endpoint,
    status: row.status,
    last_error: row.lastError,
    last_error_at: row.lastErrorAt?.toISOString() ?? null,
    last_success_at: row.lastSuccessAt?.toISOString() ?? null,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

function conflict(err: unknown): unknown {
  return err instanceof McpServerNameTakenError ? new AppError(ErrorCode.Conflict, err.message) : err;
}
