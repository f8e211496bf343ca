import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { BUILTIN_SKILLS, describeSkill } from './builtin-skills';
import { SkillsRepository } from './skills.repository';

/** A tenant's library holds at most this many skills of its own. */
export const MAX_SKILLS = 500;
const SKILL_MAX_CHARS = 100_000;
export const skillNameSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9_-]*$/, 'lowercase letters, digits, - and _ (e.g. release-checklist)');

const parameters = z
  .object({
    action: z.enum(['list', 'read', 'write']),
    name: skillNameSchema.optional().describe('read/write: the skill name (lowercase-with-dashes).'),
    content: z.string().trim().min(1, 'must not be empty').max(SKILL_MAX_CHARS).optional().describe('write: the whole Markdown document.'),
  })
  .strict()
  .superRefine((a, ctx) => {
    const missing = (field: string) => ctx.addIssue({ code: 'custom', path: [field], message: `${a.action} needs ${field}` });
    if ((a.action === 'read' || a.action === 'write') && !a.name) missing('name');
    if (a.action === 'write' && !a.content) missing('content');
  });

type SkillArgs = z.infer<typeof parameters>;

const builtins = new Map(BUILTIN_SKILLS.map((s) => [s.name, s]));

/** skill: the tenant's library of procedures, plus the read-only built-ins. */
@Injectable()
export class SkillTool implements GatewayTool {
  readonly definition = {
    name: 'skill',
    description:
      "The skill library: short documents that say how to do a kind of task well. list shows every skill with what it is for; read one before a task it covers; write a new one (or replace your own) when you worked out a procedure worth reusing. Built-in skills are read-only.",
    parameters,
    mutating: true,
    mutatingCall: (args: Record<string, unknown>) => args.action === 'write',
    toolsets: ['coding' as const, 'research' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 30,
  };

  constructor(private readonly skills: SkillsRepository) {}

  async execute(ctx: GatewayToolContext, args: SkillArgs): Promise<GatewayToolResult> {
    switch (args.action) {
      case 'list': {
        const own = await this.skills.list(ctx.tenantId);
        const lines = [
          ...BUILTIN_SKILLS.map((s) => `- ${s.name} (built-in): ${describeSkill(s.content)}`),
          ...own.map((s) => `- ${s.name}: ${s.description}`),
        ];
        return toolOutput(`${lines.length} skills; read one with action "read":\n${lines.join('\n')}`, {
          builtin: BUILTIN_SKILLS.map((s) => s.name),
          tenant: own.map((s) => s.name),
        });
      }
      case 'read': {
        const name = args.name!;
        const builtin = builtins.get(name);
        if (builtin) return toolOutput(builtin.content, { name, builtin: true });
        const skill = await this.skills.find(ctx.tenantId, name);
        if (!skill) return toolFailure(`There is no skill named ${name}; use action "list" to see the library.`);
        return toolOutput(skill.content, { name, builtin: false, updated_at: skill.updatedAt.toISOString() });
      }
      case 'write': {
        const name = args.name!;
        if (builtins.has(name)) return toolFailure(`${name} is a built-in skill and cannot be changed; write yours under another name.`);
        if (!(await this.skills.find(ctx.tenantId, name)) && (await this.skills.count(ctx.tenantId)) >= MAX_SKILLS) {
          return toolFailure(`The skill library is full (${MAX_SKILLS} skills); replace an existing skill instead.`);
        }
        const { created } = await this.skills.write(ctx.tenantId, { name, content: args.content!, description: describeSkill(args.content!) });
        return toolOutput(`${created ? 'Created' : 'Replaced'} skill ${name}.`, { name, created });
      }
    }
  }
}
