import { Injectable } from '@nestjs/common';
import { isUniqueViolation, newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';

export type McpTransportKind = 'streamable_http' | 'stdio';

/** How the gateway last found a server: `parked` ones are not tried until their re-probe. */
export type McpServerStatus = 'unknown' | 'ok' | 'failing' | 'parked';

/** An MCP server as stored; `secrets` is the sealed `{headers, env}` (never plaintext). */
export interface McpServerRow {
  id: string;
  tenantId: string;
  name: string;
  transport: McpTransportKind;
  url: string | null;
  command: string | null;
  args: string[];
  headerNames: string[];
  envNames: string[];
  secrets: string | null;
  version: number;
  status: McpServerStatus;
  lastError: string | null;
  lastErrorAt: Date | null;
  lastSuccessAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export type NewMcpServer = Pick<McpServerRow, 'name' | 'transport' | 'url' | 'command' | 'args' | 'headerNames' | 'envNames'> & {
  /** Sealed by the caller with the row's id as associated data; null when there is nothing to seal. */
  sealSecrets: (id: string) => string | null;
};

export type McpServerChanges = Partial<Pick<McpServerRow, 'name' | 'url' | 'command' | 'args' | 'headerNames' | 'envNames' | 'secrets'>>;

export type McpServerHealth = Pick<McpServerRow, 'status'> & Partial<Pick<McpServerRow, 'lastError' | 'lastErrorAt' | 'lastSuccessAt'>>;

export class McpServerNameTakenError extends Error {}

/** A tenant's MCP servers (row-level security is forced on the table; every query names the tenant). */
@Injectable()
export class McpServersRepository {
  constructor(private readonly db: PrismaService) {}

  async create(tenantId: string, input: NewMcpServer): Promise<McpServerRow> {
    const id = newId('mcp');
    const { sealSecrets, ...fields } = input;
    try {
      return toRow(await this.db.tenant(tenantId, (tx) => tx.mcpServer.create({ data: { id, tenantId, ...fields, secrets: sealSecrets(id) } })));
    } catch (err) {
      throw uniqueName(err, input.name);
    }
  }

  async list(tenantId: string): Promise<McpServerRow[]> {
    // One round trip (PrismaService.tenantRead): every run lists these before each model turn.
    const rows = await this.db.tenantRead<StoredRow>(tenantId, Prisma.sql`
      SELECT id, tenant_id AS "tenantId", name, transport, url, command, args, header_names AS "headerNames", env_names AS "envNames",
             secrets, version, status, last_error AS "lastError", last_error_at AS "lastErrorAt", last_success_at AS "lastSuccessAt",
             created_at AS "createdAt", updated_at AS "updatedAt"
        FROM mcp_servers WHERE tenant_id = ${tenantId} ORDER BY name ASC`);
    return rows.map(toRow);
  }

  async get(tenantId: string, id: string): Promise<McpServerRow | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.mcpServer.findFirst({ where: { tenantId, id } }));
    return row ? toRow(row) : null;
  }

  /** Applies a configuration change and bumps the version, so connections made before it are dropped. */
  async update(tenantId: string, id: string, changes: McpServerChanges): Promise<McpServerRow | null> {
    try {
      return await this.db.tenant(tenantId, async (tx) => {
        const { count } = await tx.mcpServer.updateMany({
          where: { tenantId, id },
          data: { ...changes, version: { increment: 1 }, status: 'unknown', lastError: null, lastErrorAt: null },
        });
        if (count === 0) return null;
        const row = await tx.mcpServer.findFirst({ where: { tenantId, id } });
        return row ? toRow(row) : null;
      });
    } catch (err) {
      throw uniqueName(err, changes.name ?? '');
    }
  }

  /** Records what a connection attempt or call found, for the configuration it was made with. */
  async recordHealth(tenantId: string, id: string, version: number, health: McpServerHealth): Promise<void> {
    await this.db.tenant(tenantId, (tx) => tx.mcpServer.updateMany({ where: { tenantId, id, version }, data: health }));
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    const { count } = await this.db.tenant(tenantId, (tx) => tx.mcpServer.deleteMany({ where: { tenantId, id } }));
    return count === 1;
  }
}

type StoredRow = Omit<McpServerRow, 'transport' | 'status' | 'args'> & { transport: string; status: string; args: Prisma.JsonValue };

const STATUSES: McpServerStatus[] = ['unknown', 'ok', 'failing', 'parked'];

function toRow(row: StoredRow): McpServerRow {
  return {
    ...row,
    transport: row.transport === 'stdio' ? 'stdio' : 'streamable_http',
    status: STATUSES.find((s) => s === row.status) ?? 'unknown',
    args: Array.isArray(row.args) ? row.args.filter((a): a is string => typeof a === 'string') : [],
  };
}

function uniqueName(err: unknown, name: string): unknown {
  if (isUniqueViolation(err)) return new McpServerNameTakenError(`an MCP server named "${name}" already exists`);
  return err;
}
