import type { Run } from '@runbox/sdk';
import { UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { RunProgress } from '../run-progress';
import { describeCall, oneLine, printable, table } from '../terminal';
import { Command, intOption, stringOption } from './command';
import { exitCodeOf, followRun } from './run';

export const runsCommand: Command = {
  name: 'runs',
  summary: 'list runs, show one, print its events, cancel it, decide its approvals',
  usage: [
    'runbox runs list [--session ID] [--limit N] [--json]',
    'runbox runs show RUN [--json]',
    'runbox runs logs RUN [--json]        events so far, then live until the run ends',
    'runbox runs wait RUN [--json]        follow the run like `runbox run` (same exit codes)',
    'runbox runs cancel RUN [--json]',
    'runbox runs approve RUN CALL | runbox runs deny RUN CALL [--reason TEXT]',
  ].join('\n       '),
  options: { session: { type: 'string' }, limit: { type: 'string' }, reason: { type: 'string' } },
  async run(ctx, values, positionals) {
    const [action, runId, callId] = positionals;
    const needRun = () => {
      if (!runId) throw new UsageError(`runs ${action} takes a run id`);
      return runId;
    };
    const rb = await ctx.client();
    switch (action) {
      case 'list': {
        const page = await rb.runs.list({ session_id: stringOption(values, 'session'), limit: intOption(values, 'limit', 1, 200) });
        if (ctx.flags.json) {
          ctx.printJson(page.data);
          return EXIT.ok;
        }
        const rows = page.data.map((r) => [r.id, colourStatus(ctx.out, r.status), r.session_id, r.created_at, tokens(r)]);
        ctx.print(rows.length ? table(['RUN', 'STATUS', 'SESSION', 'CREATED', 'TOKENS'], rows) : 'no runs');
        return EXIT.ok;
      }
      case 'show': {
        const run = await rb.runs.get(needRun());
        if (ctx.flags.json) ctx.printJson(run);
        else ctx.print(describeRun(ctx.out, run));
        return EXIT.ok;
      }
      case 'logs': {
        const progress = new RunProgress(ctx.io.stderr, ctx.err, false);
        for await (const event of rb.runs.stream(needRun())) {
          if (ctx.flags.json) ctx.io.stdout.write(`${JSON.stringify(event)}\n`);
          else ctx.print(`${ctx.out.dim(String(event.id).padStart(4))} ${ctx.out.cyan(event.type)} ${oneLine(JSON.stringify(event.data), 200)}`);
          progress.onEvent(event);
        }
        return EXIT.ok;
      }
      case 'wait':
        return followRun(ctx, rb, needRun());
      case 'cancel': {
        const run = await rb.runs.cancel(needRun());
        if (ctx.flags.json) ctx.printJson(run);
        else ctx.print(`${run.id} ${colourStatus(ctx.out, run.status)}`);
        return EXIT.ok;
      }
      case 'approve':
      case 'deny': {
        if (!callId) throw new UsageError(`runs ${action} takes a run id and a tool call id`);
        const reason = stringOption(values, 'reason');
        const result = action === 'approve' ? await rb.runs.approve(needRun(), callId, { reason }) : await rb.runs.deny(needRun(), callId, { reason });
        if (ctx.flags.json) ctx.printJson(result);
        else ctx.print(`${callId} ${action === 'approve' ? 'approved' : 'denied'}; run ${result.id} is ${result.status}`);
        return EXIT.ok;
      }
      default:
        throw new UsageError('runs takes list, show, logs, wait, cancel, approve or deny');
    }
  },
};

function tokens(run: Run): string {
  const usage = run.usage;
  if (!usage) return '';
  return String((usage.input_tokens ?? 0) + (usage.output_tokens ?? 0));
}

function colourStatus(style: { green(t: string): string; red(t: string): string; yellow(t: string): string }, status: string): string {
  if (status === 'completed') return style.green(status);
  if (status === 'failed') return style.red(status);
  if (status === 'cancelled' || status === 'requires_approval') return style.yellow(status);
  return status;
}

function describeRun(style: { bold(t: string): string; green(t: string): string; red(t: string): string; yellow(t: string): string }, run: Run): string {
  const lines = [
    `${style.bold('run')}      ${run.id}`,
    `${style.bold('status')}   ${colourStatus(style, run.status)} (exit code ${exitCodeOf(run)})`,
    `${style.bold('session')}  ${run.session_id}`,
    `${style.bold('created')}  ${run.created_at}${run.completed_at ? `, ended ${run.completed_at}` : ''}`,
  ];
  if (run.usage) lines.push(`${style.bold('usage')}    ${Object.entries(run.usage).map(([k, v]) => `${k}=${String(v)}`).join(' ')}`);
  for (const call of run.pending_approvals ?? []) lines.push(`${style.bold('waiting')}  ${call.tool_call_id} ${describeCall(call.name, call.arguments ?? {}, 100)}`);
  if (run.error) lines.push(`${style.bold('error')}    ${printable(run.error)}`);
  if (run.output) lines.push('', printable(run.output));
  return lines.join('\n');
}
