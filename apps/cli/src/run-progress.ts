import type { RunEvent, RunUsage } from '@runbox/sdk';
import { describeCall, formatDuration, oneLine, Style } from './terminal';

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/** A call running longer than this gets a spinner with its elapsed time. */
const LONG_CALL_MS = 300;
const FRAME_MS = 100;

interface RunningCall {
  line: string;
  startedAt: number;
}

/**
 * The live view of a run on stderr: one line per finished tool call (its arguments shortened,
 * how long it took), and on a terminal a status line below them with a spinner for the calls
 * still running, the elapsed time and the tokens used so far. Without a terminal it prints
 * the finished lines only, so a log stays readable.
 */
export class RunProgress {
  private readonly running = new Map<string, RunningCall>();
  private readonly startedAt: number;
  private tokens = 0;
  private frame = 0;
  private statusShown = false;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly style: Style,
    private readonly live: boolean,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
    if (live) {
      this.timer = setInterval(() => this.drawStatus(), FRAME_MS);
      this.timer.unref();
    }
  }

  /** Updates the view for one event. */
  onEvent(event: RunEvent): void {
    switch (event.type) {
      case 'tool_call.started':
        this.running.set(event.data.tool_call_id, { line: describeCall(event.data.name, event.data.arguments ?? {}, this.width() - 20), startedAt: this.now() });
        break;
      case 'tool_call.completed': {
        const call = this.running.get(event.data.tool_call_id);
        this.running.delete(event.data.tool_call_id);
        const took = call ? ` ${this.style.dim(formatDuration(this.now() - call.startedAt))}` : '';
        const mark = event.data.is_error ? this.style.red('✗') : this.style.green('✓');
        const note = event.data.status && event.data.status !== 'completed' && event.data.status !== 'failed' ? ` ${this.style.yellow(event.data.status)}` : '';
        this.line(`${mark} ${call?.line ?? event.data.name}${took}${note}`);
        break;
      }
      case 'tool_call.denied':
        this.line(`${this.style.red('⊘')} denied${event.data.reason ? `: ${oneLine(event.data.reason, 100)}` : ''}`);
        break;
      case 'message.created':
        if (event.data.role === 'assistant' && event.data.content && event.data.tool_calls?.length) this.line(this.style.dim(oneLine(event.data.content, this.width() - 2)));
        break;
      case 'guardrail.warning':
        this.line(this.style.yellow(`! ${oneLine(event.data.message, this.width() - 2)}`));
        break;
      case 'run.resumed':
        this.line(this.style.dim(`run resumed (${oneLine(event.data.reason, 60)})`));
        break;
      case 'run.completed':
        this.setUsage(event.data.usage);
        break;
    }
    this.drawStatus();
  }

  setUsage(usage: RunUsage | null | undefined): void {
    if (!usage) return;
    this.tokens = (usage.input_tokens ?? 0) + (usage.output_tokens ?? 0);
  }

  /** Prints a line above the status line. */
  line(text: string): void {
    this.clearStatus();
    this.stream.write(`${text}\n`);
    this.drawStatus();
  }

  /** Clears the status line (before a prompt, or at the end). */
  clearStatus(): void {
    if (this.statusShown) this.stream.write('\r\x1b[2K');
    this.statusShown = false;
  }

  /** The closing summary: elapsed time and tokens. */
  summary(): string {
    return this.style.dim(`${formatDuration(this.now() - this.startedAt)} · ${this.tokens.toLocaleString('en-US')} tokens`);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.clearStatus();
  }

  private drawStatus(): void {
    if (!this.live || !this.timer) return;
    const now = this.now();
    const long = [...this.running.values()].filter((c) => now - c.startedAt >= LONG_CALL_MS);
    const spinner = this.style.cyan(SPINNER[this.frame++ % SPINNER.length]);
    const what = long.length === 0 ? 'working' : long.length === 1 ? `${long[0].line} ${formatDuration(now - long[0].startedAt)}` : `${long.length} tool calls`;
    const status = `${spinner} ${what} ${this.style.dim(`· ${formatDuration(now - this.startedAt)} · ${this.tokens.toLocaleString('en-US')} tokens`)}`;
    this.stream.write(`\r\x1b[2K${status}`);
    this.statusShown = true;
  }

  private width(): number {
    return Math.max(40, Math.min(this.stream.columns || 100, 160));
  }
}
