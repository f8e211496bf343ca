import { Injectable } from '@nestjs/common';
import { isUniqueViolation, newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { OpenApiServiceDocument } from './openapi-document';

export type OpenApiAuthType = 'bearer' | 'header' | 'query';

/** A service as stored; `auth` is the sealed credential (never plaintext). */
export interface OpenApiServiceRow {
  id: string;
  name: string;
  specUrl: string | null;
  document: OpenApiServiceDocument;
  authType: OpenApiAuthType | null;
  auth: string | null;
  createdAt: Date;
}

export interface NewOpenApiService {
  name: string;
  specUrl: string | null;
  document: OpenApiServiceDocument;
  authType: OpenApiAuthType | null;
  /** Seals the credential with the row's id as associated data; absent without one. */
  sealAuth?: (id: string) => string;
}

export class ServiceNameTakenError extends Error {}

/** OpenAPI services, always within one tenant (row-level security is forced on the table). */
@Injectable()
export class OpenApiServicesRepository {
  constructor(private readonly db: PrismaService) {}

  async create(tenantId: string, input: NewOpenApiService): Promise<OpenApiServiceRow> {
    const id = newId('oas');
    try {
      const row = await this.db.tenant(tenantId, (tx) =>
        tx.openApiService.create({
          data: {
            id,
            tenantId,
            name: input.name,
            specUrl: input.specUrl,
            document: input.document as unknown as Prisma.InputJsonValue,
            authType: input.authType,
            auth: input.sealAuth ? input.sealAuth(id) : null,
          },
        }),
      );
      return toRow(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw new ServiceNameTakenError(`an OpenAPI service named "${input.name}" already exists`);
      throw err;
    }
  }

  async list(tenantId: string): Promise<OpenApiServiceRow[]> {
    // One round trip (PrismaService.tenantRead): every run lists these before each model turn.
    const rows = await this.db.tenantRead<StoredRow>(tenantId, Prisma.sql`
      SELECT id, tenant_id AS "tenantId", name, spec_url AS "specUrl", document, auth_type AS "authType", auth, created_at AS "createdAt"
        FROM openapi_services WHERE tenant_id = ${tenantId} ORDER BY name ASC`);
    return rows.map(toRow);
  }

  async get(tenantId: string, id: string): Promise<OpenApiServiceRow | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.openApiService.findFirst({ where: { tenantId, id } }));
    return row ? toRow(row) : null;
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    const { count } = await this.db.tenant(tenantId, (tx) => tx.openApiService.deleteMany({ where: { tenantId, id } }));
    return count === 1;
  }
}

type StoredRow = Prisma.OpenApiServiceGetPayload<object>;

function toRow(row: StoredRow): OpenApiServiceRow {
  return {
    id: row.id,
    name: row.name,
    specUrl: row.specUrl,
    // Written only by create() above, from a document readOpenApiDocument produced.
    document: row.document as unknown as OpenApiServiceDocument,
    authType: row.authType === 'bearer' || row.authType === 'header' || row.authType === 'query' ? row.authType : null,
    auth: row.auth,
    createdAt: row.createdAt,
  };
}
