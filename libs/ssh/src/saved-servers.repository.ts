import { Injectable } from '@nestjs/common';
import { isUniqueViolation, newId, PrismaService } from '@app/persistence';

/** A saved server as stored; `credentials` is the sealed value (never plaintext). */
export interface SavedServerRow {
  id: string;
  name: string;
  host: string;
  port: number;
  username: string;
  authType: 'key' | 'password';
  credentials: string;
  hostKeyFingerprint: string | null;
  hostKeyPinnedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewSavedServer {
  name: string;
  host: string;
  port: number;
  username: string;
  authType: 'key' | 'password';
  /** Sealed by the caller with the row's id as associated data. */
  sealCredentials: (id: string) => string;
}

export type SavedServerChanges = Partial<Pick<SavedServerRow, 'name' | 'host' | 'port' | 'username' | 'authType' | 'credentials' | 'hostKeyFingerprint' | 'hostKeyPinnedAt'>>;

export class ServerNameTakenError extends Error {}

/** Saved servers, always within one tenant (row-level security is forced on the table). */
@Injectable()
export class SavedServersRepository {
  constructor(private readonly db: PrismaService) {}

  async create(tenantId: string, input: NewSavedServer): Promise<SavedServerRow> {
    const id = newId('srv');
    const { sealCredentials, ...fields } = input;
    try {
      return toRow(await this.db.tenant(tenantId, (tx) => tx.savedServer.create({ data: { id, tenantId, ...fields, credentials: sealCredentials(id) } })));
    } catch (err) {
      throw uniqueName(err, input.name);
    }
  }

  async list(tenantId: string): Promise<SavedServerRow[]> {
    const rows = await this.db.tenant(tenantId, (tx) => tx.savedServer.findMany({ where: { tenantId }, orderBy: { name: 'asc' } }));
    return rows.map(toRow);
  }

  async get(tenantId: string, id: string): Promise<SavedServerRow | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.savedServer.findFirst({ where: { tenantId, id } }));
    return row ? toRow(row) : null;
  }

  async getByName(tenantId: string, name: string): Promise<SavedServerRow | null> {
    const row = await this.db.tenant(tenantId, (tx) => tx.savedServer.findFirst({ where: { tenantId, name } }));
    return row ? toRow(row) : null;
  }

  async update(tenantId: string, id: string, changes: SavedServerChanges): Promise<SavedServerRow | null> {
    try {
      return await this.db.tenant(tenantId, async (tx) => {
        const { count } = await tx.savedServer.updateMany({ where: { tenantId, id }, data: changes });
        if (count === 0) return null;
        const row = await tx.savedServer.findFirst({ where: { tenantId, id } });
        return row ? toRow(row) : null;
      });
    } catch (err) {
      throw uniqueName(err, changes.name ?? '');
    }
  }

  /**
   * Pins a host key seen on first connect, only if none is pinned yet: of two first
   * connections racing with different keys, one pins and the other is refused.
   */
  async pinIfUnpinned(tenantId: string, id: string, fingerprint: string): Promise<boolean> {
    const { count } = await this.db.tenant(tenantId, (tx) =>
      tx.savedServer.updateMany({ where: { tenantId, id, hostKeyFingerprint: null }, data: { hostKeyFingerprint: fingerprint, hostKeyPinnedAt: new Date() } }),
    );
    return count === 1;
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    const { count } = await this.db.tenant(tenantId, (tx) => tx.savedServer.deleteMany({ where: { tenantId, id } }));
    return count === 1;
  }
}

type StoredRow = Omit<SavedServerRow, 'authType'> & { authType: string; tenantId: string };

function toRow(row: StoredRow): SavedServerRow {
  const { tenantId: _tenantId, ...rest } = row;
  return { ...rest, authType: row.authType === 'password' ? 'password' : 'key' };
}

function uniqueName(err: unknown, name: string): unknown {
  if (isUniqueViolation(err)) return new ServerNameTakenError(`a server named "${name}" already exists`);
  return err;
}
