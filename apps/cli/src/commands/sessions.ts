import { UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { table } from '../terminal';
import { Command, intOption } from './command';

export const sessionsCommand: Command = {
  name: 'sessions',
  summary: 'list, create and remove sessions (a sandbox and a history)',
  usage: ['runbox sessions list [--limit N] [--json]', 'runbox sessions create [--metadata KEY=VALUE]... [--json]', 'runbox sessions rm ID...'].join('\n       '),
  options: { limit: { type: 'string' }, metadata: { type: 'string', multiple: true } },
  async run(ctx, values, positionals) {
    const [action, ...ids] = positionals;
    const rb = await ctx.client();
    switch (action) {
      case 'list':
      case 'ls': {
        const page = await rb.sessions.list({ limit: intOption(values, 'limit', 1, 200) });
        if (ctx.flags.json) {
          ctx.printJson(page.data);
          return EXIT.ok;
        }
        const rows = page.data.map((s) => [s.id, s.status, s.sandbox?.state ?? '', s.created_at]);
        ctx.print(rows.length ? table(['SESSION', 'STATUS', 'SANDBOX', 'CREATED'], rows) : 'no sessions');
        return EXIT.ok;
      }
      case 'create': {
        const metadata = parseMetadata(values.metadata);
        const session = await rb.sessions.create(metadata ? { metadata } : {});
        if (ctx.flags.json) ctx.printJson(session.info);
        else ctx.print(session.id);
        return EXIT.ok;
      }
      case 'rm':
      case 'delete': {
        if (ids.length === 0) throw new UsageError('sessions rm takes one or more session ids');
        for (const id of ids) {
          await rb.sessions.delete(id);
          if (!ctx.flags.json) ctx.print(`removed ${id}`);
        }
        if (ctx.flags.json) ctx.printJson({ removed: ids });
        return EXIT.ok;
      }
      default:
        throw new UsageError('sessions takes list, create or rm');
    }
  },
};

function parseMetadata(raw: unknown): Record<string, string> | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  const metadata: Record<string, string> = {};
  for (const pair of raw as string[]) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--metadata takes KEY=VALUE, not ${JSON.stringify(pair)}`);
    metadata[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return metadata;
}
