import { Runbox, TERMINAL_RUN_STATUSES, type CreateRunBody, type PendingApproval, type Run } from '@runbox/sdk';
import { CliContext, UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { ask } from '../prompt';
import { RunProgress } from '../run-progress';
import { describeCall, oneLine, printable } from '../terminal';
import { Command, stringOption } from './command';

const APPROVAL_MODES = ['auto', 'prompt', 'deny'] as const;

export const runCommand: Command = {
  name: 'run',
  summary: 'start a run and follow it live until its answer',
  usage: 'runbox run "PROMPT" [--session ID] [--toolset NAME] [--approval auto|prompt|deny] [--model NAME] [--json]',
  options: {
    session: { type: 'string' },
    toolset: { type: 'string' },
    approval: { type: 'string' },
    model: { type: 'string' },
    system: { type: 'string' },
  },
  async run(ctx, values, positionals) {
    if (positionals.length !== 1 || positionals[0].trim() === '') throw new UsageError('run takes one prompt (quote it)');
    const approval = stringOption(values, 'approval');
    if (approval !== undefined && !(APPROVAL_MODES as readonly string[]).includes(approval)) throw new UsageError(`--approval must be one of ${APPROVAL_MODES.join(', ')}`);
    const body: CreateRunBody = { input: positionals[0] };
    const session = stringOption(values, 'session');
    if (session) body.session_id = session;
    const toolset = stringOption(values, 'toolset');
    if (toolset) body.toolset = toolset;
    if (approval) body.approval_mode = approval as CreateRunBody['approval_mode'];
    const model = stringOption(values, 'model');
    if (model) body.model = model;
    const system = stringOption(values, 'system');
    if (system) body.system = system;
    const rb = await ctx.client();
    const run = await rb.runs.create(body);
    if (!ctx.flags.json) ctx.note(ctx.err.dim(`run ${run.id} · session ${run.session_id}`));
    return followRun(ctx, rb, run.id);
  },
};

/** The exit code that tells a script how a run ended. */
export function exitCodeOf(run: Run): number {
  if (run.status === 'completed') return EXIT.ok;
  if (run.status === 'cancelled') return EXIT.cancelled;
  if (run.status === 'requires_approval') return EXIT.needsApproval;
  return EXIT.failed;
}

/**
 * Follows a run to its end: the live view on stderr, approvals asked on a terminal, the
 * answer on stdout. Without a terminal a run that needs approval is left waiting (exit 3),
 * to be decided with the API or `runbox runs show`. Ctrl-C cancels the run.
 */
export async function followRun(ctx: CliContext, rb: Runbox, runId: string): Promise<number> {
  const progress = new RunProgress(ctx.io.stderr, ctx.err, !ctx.flags.json && ctx.io.stderr.isTTY === true);
  const stop = new AbortController();
  let cancelling = false;
  const onInterrupt = () => {
    if (cancelling) return stop.abort(new Error('interrupted'));
    cancelling = true;
    progress.line(ctx.err.yellow('cancelling the run (Ctrl-C again to stop waiting)'));
    rb.runs.cancel(runId).catch((err: unknown) => progress.line(ctx.err.red(`could not cancel: ${(err as Error).message}`)));
  };
  process.on('SIGINT', onInterrupt);
  try {
    for await (const event of rb.runs.stream(runId, { signal: stop.signal })) {
      if (!ctx.flags.json) progress.onEvent(event);
      if (event.type === 'message.created' && event.data.role === 'assistant') progress.setUsage((await rb.runs.get(runId)).usage);
      if (event.type !== 'run.requires_approval') continue;
      // The run as it is now: a followed run's history replays waits that were decided since.
      const run = await rb.runs.get(runId);
      if (run.status !== 'requires_approval') continue;
      if (!ctx.interactive || ctx.flags.json) {
        progress.stop();
        return reportWaiting(ctx, run);
      }
      progress.clearStatus();
      for (const call of run.pending_approvals ?? []) await decide(ctx, rb, runId, call);
    }
  } finally {
    process.off('SIGINT', onInterrupt);
    progress.stop();
  }
  const run = await rb.runs.get(runId);
  return reportEnd(ctx, run, progress);
}

/** Asks about one waiting call (of this run or of a sub-run: the run takes both) and sends the answer. */
async function decide(ctx: CliContext, rb: Runbox, runId: string, call: PendingApproval): Promise<void> {
  const { stdin, stderr } = ctx.io;
  ctx.note(`${ctx.err.yellow('?')} ${ctx.err.bold(describeCall(call.name, call.arguments ?? {}, 200))}`);
  if (call.reason) ctx.note(ctx.err.dim(`  ${oneLine(call.reason, 200)}`));
  for (;;) {
    const answer = (await ask(stdin, stderr, '  approve? [y]es / [n]o / [r]eason to deny: ')).toLowerCase();
    if (answer === 'y' || answer === 'yes') {
      await rb.runs.approve(runId, call.tool_call_id);
      return;
    }
    if (answer === 'n' || answer === 'no') {
      await rb.runs.deny(runId, call.tool_call_id);
      return;
    }
    if (answer === 'r' || answer === 'reason') {
      const reason = await ask(stdin, stderr, '  reason: ');
      await rb.runs.deny(runId, call.tool_call_id, reason ? { reason } : {});
      return;
    }
  }
}

function reportWaiting(ctx: CliContext, run: Run): number {
  if (ctx.flags.json) {
    ctx.printJson(run);
    return exitCodeOf(run);
  }
  ctx.note(ctx.err.yellow(`run ${run.id} is waiting for approval:`));
  for (const call of run.pending_approvals ?? []) {
    ctx.note(`  ${call.tool_call_id}  ${describeCall(call.name, call.arguments ?? {}, 120)}`);
  }
  ctx.note(ctx.err.dim('decide on a terminal with `runbox runs approve|deny RUN CALL`, or through the API'));
  return exitCodeOf(run);
}

function reportEnd(ctx: CliContext, run: Run, progress: RunProgress): number {
  if (ctx.flags.json) {
    ctx.printJson(run);
    return exitCodeOf(run);
  }
  progress.setUsage(run.usage);
  if (run.status === 'completed') {
    ctx.print(printable(run.output ?? ''));
    ctx.note(progress.summary());
  } else if (run.status === 'cancelled') {
    ctx.note(ctx.err.yellow(`run ${run.id} was cancelled`));
  } else if (TERMINAL_RUN_STATUSES.has(run.status)) {
    ctx.note(ctx.err.red(`run ${run.id} failed: ${printable(run.error ?? 'no reason given')}`));
  }
  return exitCodeOf(run);
}
