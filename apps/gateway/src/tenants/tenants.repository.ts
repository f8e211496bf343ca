import { Injectable } from '@nestjs/common';
import { isUniqueViolation, newId, PrismaService } from '@app/persistence';
import { Prisma } from '@prisma/client';
import { ApiKeyRecord, ApiKeyStore } from '../auth/api-key-store';
import { parseStoredLimits, TenantLimits } from '../quotas/tenant-limits';

/**
 * A tenant's or key's saved run defaults, as stored: the admin API validates them against the
 * runs feature's schema before they are written, and runs read them back through their own
 * repository, so tenancy keeps them as opaque JSON and does not depend on runs.
 */
export type SavedRunDefaults = Record<string, unknown>;

export interface TenantView {
  id: string;
  name: string;
  limits: TenantLimits;
  runDefaults: SavedRunDefaults | null;
  /** Tools this tenant's runs treat as changing state, for approvals. */
  approvalRequired: string[];
  /** The browser tool's evaluate action (script in the page) is open to this tenant's runs. */
  browserEvaluate: boolean;
  createdAt: Date;
}

export interface ApiKeyView {
  id: string;
  name: string | null;
  prefix: string;
  runDefaults: SavedRunDefaults | null;
  createdAt: Date;
  revokedAt: Date | null;
}

const API_KEY_COLUMNS = { id: true, name: true, prefix: true, runDefaults: true, createdAt: true, revokedAt: true } as const;

/** Tenants and their API keys: deployment-wide data, read and written by the admin API and auth. */
@Injectable()
export class TenantsRepository implements ApiKeyStore {
  constructor(private readonly db: PrismaService) {}

  async create(name: string, limits: TenantLimits): Promise<TenantView | 'exists'> {
    try {
      return await this.db.system((tx) =>
        tx.tenant.create({ data: { id: newId('ten'), name, limits: limits as Prisma.InputJsonValue } }),
      ).then(toTenant);
    } catch (err) {
      if (isUniqueViolation(err)) return 'exists';
      throw err;
    }
  }

  async findById(id: string): Promise<TenantView | null> {
    const row = await this.db.system((tx) => tx.tenant.findUnique({ where: { id } }));
    return row ? toTenant(row) : null;
  }

  /** Every tenant, newest first. */
  async list(limit: number): Promise<TenantView[]> {
    const rows = await this.db.system((tx) => tx.tenant.findMany({ orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit }));
    return rows.map(toTenant);
  }

  async findByName(name: string): Promise<TenantView | null> {
    const row = await this.db.system((tx) => tx.tenant.findUnique({ where: { name } }));
    return row ? toTenant(row) : null;
  }

  /**
   * Replaces the tenant's limits with `update(current)`, reading and writing under a row
   * lock so two concurrent changes cannot lose each other's. Null when there is no tenant.
   */
  async updateLimits(id: string, update: (current: TenantLimits) => TenantLimits): Promise<TenantView | null> {
    return this.db.system(async (tx) => {
      const [row] = await tx.$queryRaw<Array<{ limits: Prisma.JsonValue }>>`SELECT limits FROM tenants WHERE id = ${id} FOR UPDATE`;
      if (!row) return null;
      const limits = update(parseStoredLimits(row.limits));
      return toTenant(await tx.tenant.update({ where: { id }, data: { limits: limits as Prisma.InputJsonValue } }));
    });
  }

  /** Replaces (or, with null, clears) the defaults of the tenant's runs. Null when there is no tenant. */
  async setRunDefaults(id: string, defaults: SavedRunDefaults | null): Promise<TenantView | null> {
    const res = await this.db.system((tx) => tx.tenant.updateMany({ where: { id }, data: { runDefaults: jsonOrNull(defaults) } }));
    return res.count > 0 ? this.findById(id) : null;
  }

  /** Replaces the tools that need approval in the tenant's runs ([] clears them). Null when there is no tenant. */
  async setApprovalRequired(id: string, tools: string[]): Promise<TenantView | null> {
    const res = await this.db.system((tx) => tx.tenant.updateMany({ where: { id }, data: { approvalRequired: tools } }));
    return res.count > 0 ? this.findById(id) : null;
  }

  /** Opens or closes the browser's evaluate action to the tenant's runs. Null when there is no tenant. */
  async setBrowserEvaluate(id: string, allowed: boolean): Promise<TenantView | null> {
    const res = await this.db.system((tx) => tx.tenant.updateMany({ where: { id }, data: { browserEvaluate: allowed } }));
    return res.count > 0 ? this.findById(id) : null;
  }

  async listKeys(tenantId: string): Promise<ApiKeyView[]> {
    const rows = await this.db.system((tx) =>
      tx.apiKey.findMany({ where: { tenantId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }], select: API_KEY_COLUMNS }),
    );
    return rows.map(toApiKey);
  }

  /** Replaces (or clears) the defaults of runs made with this key. Null when there is no such key. */
  async setKeyRunDefaults(id: string, defaults: SavedRunDefaults | null): Promise<ApiKeyView | null> {
    return this.db.system(async (tx) => {
      const res = await tx.apiKey.updateMany({ where: { id }, data: { runDefaults: jsonOrNull(defaults) } });
      if (res.count === 0) return null;
      const row = await tx.apiKey.findUnique({ where: { id }, select: API_KEY_COLUMNS });
      return row ? toApiKey(row) : null;
    });
  }

  async addKey(tenantId: string, name: string | undefined, prefix: string, keyHash: string): Promise<{ id: string }> {
    return this.db.system((tx) =>
      tx.apiKey.create({ data: { id: newId('key'), tenantId, name, prefix, keyHash }, select: { id: true } }),
    );
  }

  /** Marks the key revoked; false when there is no such key. */
  async revokeKey(id: string): Promise<boolean> {
    const res = await this.db.system((tx) =>
      tx.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } }),
    );
    if (res.count > 0) return true;
    return (await this.db.system((tx) => tx.apiKey.count({ where: { id } }))) > 0;
  }

  async findKeyByPrefix(prefix: string): Promise<ApiKeyRecord | null> {
    const row = await this.db.system((tx) => tx.apiKey.findFirst({ where: { prefix } }));
    return row
      ? { id: row.id, tenantId: row.tenantId, prefix: row.prefix, keyHash: row.keyHash, revoked: row.revokedAt !== null }
      : null;
  }
}

function toTenant(row: {
  id: string;
  name: string;
  limits: Prisma.JsonValue;
  runDefaults: Prisma.JsonValue;
  approvalRequired: string[];
  browserEvaluate: boolean;
  createdAt: Date;
}): TenantView {
  return {
    id: row.id,
    name: row.name,
    limits: parseStoredLimits(row.limits),
    runDefaults: storedRunDefaults(row.runDefaults),
    approvalRequired: row.approvalRequired,
    browserEvaluate: row.browserEvaluate,
    createdAt: row.createdAt,
  };
}

function toApiKey(row: Omit<ApiKeyView, 'runDefaults'> & { runDefaults: Prisma.JsonValue }): ApiKeyView {
  return { ...row, runDefaults: storedRunDefaults(row.runDefaults) };
}

function storedRunDefaults(value: Prisma.JsonValue): SavedRunDefaults | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as SavedRunDefaults) : null;
}

function jsonOrNull(value: SavedRunDefaults | null): Prisma.InputJsonValue | typeof Prisma.DbNull {
  return value === null ? Prisma.DbNull : (value as Prisma.InputJsonValue);
}
