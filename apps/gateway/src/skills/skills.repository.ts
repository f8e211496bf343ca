import { Injectable } from '@nestjs/common';
import { PrismaService } from '@app/persistence';

export interface SkillView {
  name: string;
  description: string;
  content: string;
  updatedAt: Date;
}

/** A tenant's own skills, always within one tenant. */
@Injectable()
export class SkillsRepository {
  constructor(private readonly db: PrismaService) {}

  async list(tenantId: string): Promise<Array<Omit<SkillView, 'content'>>> {
    return this.db.tenant(tenantId, (tx) =>
      tx.skill.findMany({ where: { tenantId }, orderBy: { name: 'asc' }, select: { name: true, description: true, updatedAt: true } }),
    );
  }

  async find(tenantId: string, name: string): Promise<SkillView | null> {
    return this.db.tenant(tenantId, (tx) =>
      tx.skill.findFirst({ where: { tenantId, name }, select: { name: true, description: true, content: true, updatedAt: true } }),
    );
  }

  /**
   * The tenant's skills whose name, description or content contains `query` (case-insensitive,
   * taken literally: % and _ match only themselves), by name.
   */
  async search(tenantId: string, query: string, limit: number): Promise<Array<Omit<SkillView, 'content'>>> {
    const pattern = `%${query.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    return this.db.tenant(tenantId, (tx) =>
      tx.$queryRaw<Array<Omit<SkillView, 'content'>>>`
        SELECT name, description, updated_at AS "updatedAt" FROM skills
        WHERE tenant_id = ${tenantId}
          AND (name ILIKE ${pattern} ESCAPE '\\' OR description ILIKE ${pattern} ESCAPE '\\' OR content ILIKE ${pattern} ESCAPE '\\')
        ORDER BY name LIMIT ${limit}`,
    );
  }

  /** True when the skill existed and is gone. */
  async delete(tenantId: string, name: string): Promise<boolean> {
    const { count } = await this.db.tenant(tenantId, (tx) => tx.skill.deleteMany({ where: { tenantId, name } }));
    return count > 0;
  }

  async count(tenantId: string): Promise<number> {
    return this.db.tenant(tenantId, (tx) => tx.skill.count({ where: { tenantId } }));
  }

  /** Creates or replaces; `created` says which. */
  async write(tenantId: string, skill: { name: string; description: string; content: string }): Promise<{ created: boolean }> {
    return this.db.tenant(tenantId, async (tx) => {
      const rows = await tx.$queryRaw<Array<{ created: boolean }>>`
        INSERT INTO skills (tenant_id, name, description, content)
        VALUES (${tenantId}, ${skill.name}, ${skill.description}, ${skill.content})
        ON CONFLICT (tenant_id, name) DO UPDATE
          SET description = EXCLUDED.description, content = EXCLUDED.content, updated_at = CURRENT_TIMESTAMP
        RETURNING (xmax = 0) AS created`;
      return { created: rows[0].created };
    });
  }
}
