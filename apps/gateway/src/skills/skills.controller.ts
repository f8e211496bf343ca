import { Controller, Delete, Get, HttpCode, UseGuards } from '@nestjs/common';
import { z } from 'zod';
import { AppError, ErrorCode } from '@app/errors';
import { ApiOperation } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { ValidParam, ValidQuery } from '../common/validation/request-parts';
import { BUILTIN_SKILLS, BuiltinSkill, describeSkill } from './builtin-skills';
import { skillNameSchema } from './skill.tool';
import { SkillsRepository, SkillView } from './skills.repository';
import { skillListSchema, skillSchema, skillSummarySchema } from './skills.responses';

const listQuerySchema = z
  .object({
    /** Only skills whose name, description or text contains this (case-insensitive). */
    query: z.string().trim().min(1).max(200).optional(),
    limit: z.coerce.number().int().min(1).max(500).default(500),
  })
  .strict();

/**
 * The skill library over HTTP: the built-ins (read-only) and the tenant's own, which the
 * skill tool writes. Listing and reading show both; only the tenant's own can be deleted.
 */
@Controller('v1/skills')
@UseGuards(ApiKeyGuard)
export class SkillsController {
  constructor(private readonly skills: SkillsRepository) {}

  @Get()
  @ApiOperation({ summary: "List skills: the built-ins and the tenant's own, optionally those containing a text", response: skillListSchema })
  async list(@TenantId() tenantId: string, @ValidQuery(listQuerySchema) q: z.output<typeof listQuerySchema>) {
    const query = q.query?.toLowerCase();
    const builtins = BUILTIN_SKILLS.filter((s) => !query || `${s.name}\n${s.content}`.toLowerCase().includes(query));
    const own = query ? await this.skills.search(tenantId, q.query!, q.limit) : await this.skills.list(tenantId);
    return { data: [...builtins.map(builtinJson), ...own.map((s) => ownJson(s))].slice(0, q.limit) };
  }

  @Get(':name')
  @ApiOperation({ summary: 'Read a skill with its text', response: skillSchema })
  async get(@TenantId() tenantId: string, @ValidParam('name', skillNameSchema) name: string) {
    const builtin = BUILTIN_SKILLS.find((s) => s.name === name);
    if (builtin) return { ...builtinJson(builtin), content: builtin.content };
    const skill = await this.skills.find(tenantId, name);
    if (!skill) throw AppError.notFound('skill', name);
    return { ...ownJson(skill), content: skill.content };
  }

  @Delete(':name')
  @ApiOperation({ summary: "Delete one of the tenant's own skills (a built-in answers 409)", errors: [ErrorCode.Conflict] })
  @HttpCode(204)
  async delete(@TenantId() tenantId: string, @ValidParam('name', skillNameSchema) name: string): Promise<void> {
    if (BUILTIN_SKILLS.some((s) => s.name === name)) throw new AppError(ErrorCode.Conflict, `${name} is a built-in skill and cannot be deleted`);
    if (!(await this.skills.delete(tenantId, name))) throw AppError.notFound('skill', name);
  }
}

function builtinJson(s: BuiltinSkill): z.output<typeof skillSummarySchema> {
  return { name: s.name, description: describeSkill(s.content), builtin: true, updated_at: null };
}

function ownJson(s: Omit<SkillView, 'content'>): z.output<typeof skillSummarySchema> {
  return { name: s.name, description: s.description, builtin: false, updated_at: s.updatedAt.toISOString() };
}
