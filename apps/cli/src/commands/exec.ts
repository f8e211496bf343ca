import { UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { Command, intOption } from './command';

export const execCommand: Command = {
  name: 'exec',
  summary: "run a shell command in a session's sandbox (its exit code becomes runbox's)",
  usage: 'runbox exec SESSION [--timeout SECONDS] [--json] -- COMMAND...',
  options: { timeout: { type: 'string' } },
  async run(ctx, values, positionals, rest) {
    const [sessionId, ...extra] = positionals;
    if (!sessionId) throw new UsageError('exec takes a session id');
    const words = [...extra, ...rest];
    if (words.length === 0) throw new UsageError('exec takes a command after --');
    const rb = await ctx.client();
    // The words are joined as the shell would see them typed: quote inside one argument to keep spaces.
    const result = await rb.sessions.ref(sessionId).commands.run(words.join(' '), { timeoutSeconds: intOption(values, 'timeout', 1, 900) });
    if (ctx.flags.json) {
      ctx.printJson({ exit_code: result.exitCode, timed_out: result.timedOut, stdout: result.stdout, stderr: result.stderr, metadata: result.metadata });
    } else {
      if (result.stdout) ctx.io.stdout.write(`${result.stdout}\n`);
      if (result.stderr) ctx.io.stderr.write(`${result.stderr}\n`);
      if (result.timedOut) ctx.note(ctx.err.yellow('timed out: the command was killed'));
      else if (result.exitCode === null) ctx.note(ctx.err.yellow(result.output));
    }
    if (result.exitCode === null) return EXIT.failed;
    return Math.min(result.exitCode, 255);
  },
};
