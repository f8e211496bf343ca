import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { TODO_STATUSES, TodoLimitError, TodosRepository, TodoView } from './todos.repository';

const content = z.string().trim().min(1, 'must not be empty').max(1_000);
const status = z.enum(TODO_STATUSES);

const parameters = z
  .object({
    action: z.enum(['list', 'add', 'update', 'remove']),
    items: z
      .array(z.union([content, z.object({ content, status: status.optional() }).strict()]))
      .min(1)
      .max(50)
      .optional()
      .describe('add: the tasks, as strings or {content, status}.'),
    id: z
      .union([z.number().int().min(1), z.string().regex(/^\d{1,9}$/, 'a task number').transform(Number)])
      .optional()
      .describe('update/remove: the task number the list shows.'),
    status: status.optional().describe('update: the new status.'),
  })
  .strict()
  .superRefine((a, ctx) => {
    const missing = (field: string) => ctx.addIssue({ code: 'custom', path: [field], message: `${a.action} needs ${field}` });
    if (a.action === 'add' && !a.items) missing('items');
    if ((a.action === 'update' || a.action === 'remove') && a.id === undefined) missing('id');
    if (a.action === 'update' && !a.status) missing('status');
  });

type TodoArgs = z.infer<typeof parameters>;

const MARK: Record<TodoView['status'], string> = { pending: '[ ]', in_progress: '[~]', completed: '[x]', cancelled: '[-]' };

/** todo: the session's task list, kept by the model so progress stays visible. */
@Injectable()
export class TodoTool implements GatewayTool {
  readonly definition = {
    name: 'todo',
    description:
      'Keep a task list for this session so progress stays visible across turns and runs. add tasks when work has several steps; update a task\'s status (pending, in_progress, completed, cancelled) as you go, keeping one in_progress at a time; remove tasks that no longer apply; list to see where things stand. Every action answers with the whole list.',
    parameters,
    mutating: false,
    toolsets: ['minimal' as const, 'coding' as const, 'research' as const, 'browser' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 30,
  };

  constructor(private readonly todos: TodosRepository) {}

  async execute(ctx: GatewayToolContext, args: TodoArgs): Promise<GatewayToolResult> {
    const { tenantId, sessionId } = ctx;
    switch (args.action) {
      case 'list':
        return answer(await this.todos.list(tenantId, sessionId));
      case 'add': {
        const items = args.items!.map((i) => (typeof i === 'string' ? { content: i, status: 'pending' as const } : { content: i.content, status: i.status ?? ('pending' as const) }));
        try {
          return answer(await this.todos.add(tenantId, sessionId, items), `Added ${items.length} ${items.length === 1 ? 'task' : 'tasks'}.`);
        } catch (err) {
          if (err instanceof TodoLimitError) return toolFailure(`Not added: ${err.message}.`);
          throw err;
        }
      }
      case 'update': {
        const list = await this.todos.update(tenantId, sessionId, args.id!, args.status!);
        return list ? answer(list, `Task ${args.id} is now ${args.status}.`) : missing(args.id!);
      }
      case 'remove': {
        const list = await this.todos.remove(tenantId, sessionId, args.id!);
        return list ? answer(list, `Removed task ${args.id}.`) : missing(args.id!);
      }
    }
  }
}

function answer(list: TodoView[], done?: string): GatewayToolResult {
  const finished = list.filter((t) => t.status === 'completed').length;
  const body = list.length ? list.map((t) => `${MARK[t.status]} ${t.id}. ${t.content}${t.status === 'in_progress' ? ' (in progress)' : ''}`).join('\n') : '(no tasks)';
  const header = `Todo list: ${finished} of ${list.length} completed.`;
  return toolOutput([done, header, body].filter(Boolean).join('\n'), {
    todos: list.map((t) => ({ id: t.id, content: t.content, status: t.status })),
  });
}

function missing(id: number): GatewayToolResult {
  return toolFailure(`There is no task ${id} in this session's list; use action "list" to see the numbers.`);
}
