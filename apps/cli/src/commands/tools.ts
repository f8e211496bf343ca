import { EXIT } from '../exit-codes';
import { oneLine, table } from '../terminal';
import { Command } from './command';

export const toolsCommand: Command = {
  name: 'tools',
  summary: 'list the tools runs can use',
  usage: 'runbox tools [--json]',
  async run(ctx) {
    const tools = await (await ctx.client()).tools();
    if (ctx.flags.json) {
      ctx.printJson(tools);
      return EXIT.ok;
    }
    const width = Math.max(40, (ctx.io.stdout.columns || 120) - 50);
    const rows = tools.map((t) => [t.name, t.toolsets.join(','), t.mutating ? 'yes' : '', oneLine(t.description.split('\n')[0], width)]);
    ctx.print(table(['TOOL', 'TOOLSETS', 'WRITES', 'DESCRIPTION'], rows));
    return EXIT.ok;
  },
};
