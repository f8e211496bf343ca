import { ApiError, RunboxError, SDK_VERSION } from '@runbox/sdk';
import { parseArgs } from 'node:util';
import { Command, OptionSpec } from './commands/command';
import { cpCommand } from './commands/cp';
import { execCommand } from './commands/exec';
import { loginCommand } from './commands/login';
import { runCommand } from './commands/run';
import { runsCommand } from './commands/runs';
import { sessionsCommand } from './commands/sessions';
import { toolsCommand } from './commands/tools';
import { CliContext, CliIO, GlobalFlags, UsageError } from './context';
import { EXIT } from './exit-codes';
import { printable } from './terminal';

const COMMANDS: Command[] = [runCommand, runsCommand, sessionsCommand, execCommand, cpCommand, toolsCommand, loginCommand];

const GLOBAL_OPTIONS: OptionSpec = {
  json: { type: 'boolean' },
  'no-color': { type: 'boolean' },
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'runbox: run agents and use their sandboxes from a terminal',
    '',
    'usage: runbox COMMAND [options]',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'options for every command:',
    '  --json            machine-readable output on stdout',
    '  --no-color        no colour (also NO_COLOR=1; colour is only used on a terminal)',
    '  --base-url URL    the gateway (default: RUNBOX_BASE_URL, then `runbox login`, then http://localhost:8080)',
    '  --api-key KEY     the API key (default: RUNBOX_API_KEY, then `runbox login`)',
    '',
    'exit codes: 0 done, 1 failed (or an error), 2 run cancelled, 3 run waits for approval',
    "`runbox COMMAND --help` shows a command's usage.",
  ].join('\n');
}

/** Runs one command line and returns the exit code. */
export async function main(argv: string[], io: CliIO = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env }): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${overview()}\n`);
    return name === undefined ? EXIT.failed : EXIT.ok;
  }
  if (name === '--version' || name === 'version') {
    io.stdout.write(`runbox ${SDK_VERSION}\n`);
    return EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.stderr.write(`runbox: no command '${printable(name)}'\n\n${overview()}\n`);
    return EXIT.failed;
  }
  // Everything after `--` belongs to the command (exec's command line), never to runbox.
  const dash = args.indexOf('--');
  const own = dash >= 0 ? args.slice(0, dash) : args;
  const rest = dash >= 0 ? args.slice(dash + 1) : [];
  let ctx: CliContext | undefined;
  try {
    const parsed = parseOrExplain(command, own);
    const values = parsed.values as Record<string, string | boolean | undefined>;
    if (values.help) {
      io.stdout.write(`usage: ${command.usage}\n`);
      return EXIT.ok;
    }
    const flags: GlobalFlags = {
      json: values.json === true,
      noColor: values['no-color'] === true,
      baseUrl: typeof values['base-url'] === 'string' ? values['base-url'] : undefined,
      apiKey: typeof values['api-key'] === 'string' ? values['api-key'] : undefined,
    };
    ctx = new CliContext(io, flags);
    return await command.run(ctx, parsed.values, parsed.positionals, rest);
  } catch (err) {
    return reportError(io, command, err, ctx);
  }
}

function parseOrExplain(command: Command, args: string[]) {
  try {
    return parseArgs({ args, options: { ...GLOBAL_OPTIONS, ...command.options }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function reportError(io: CliIO, command: Command, err: unknown, ctx?: CliContext): number {
  const red = ctx?.err.red ?? ((t: string) => t);
  if (err instanceof UsageError) {
    io.stderr.write(`${red('runbox:')} ${printable(err.message)}\nusage: ${command.usage}\n`);
  } else if (err instanceof ApiError) {
    io.stderr.write(`${red('runbox:')} ${printable(err.message)} (${printable(err.code)}, HTTP ${err.status})\n`);
    if (ctx?.flags.json) io.stdout.write(`${JSON.stringify({ error: { code: err.code, message: err.message, status: err.status } })}\n`);
  } else if (err instanceof RunboxError) {
    io.stderr.write(`${red('runbox:')} ${printable(err.message)}\n`);
  } else {
    io.stderr.write(`${red('runbox:')} ${printable(err instanceof Error ? err.message : String(err))}\n`);
  }
  return EXIT.failed;
}
