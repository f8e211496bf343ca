/** How output should look where it goes: colour only on a terminal, and never under NO_COLOR. */
export interface Style {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

export function colourEnabled(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv, noColorFlag: boolean): boolean {
  if (noColorFlag || (env.NO_COLOR !== undefined && env.NO_COLOR !== '') || env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

export function makeStyle(colour: boolean): Style {
  const wrap = (open: number, close: number) => (text: string) => (colour ? `\x1b[${open}m${text}\x1b[${close}m` : text);
  return { bold: wrap(1, 22), dim: wrap(2, 22), red: wrap(31, 39), green: wrap(32, 39), yellow: wrap(33, 39), cyan: wrap(36, 39) };
}

/** Text from a server, made safe to print: no escape sequences or other control characters. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '').replace(/[\x00-\x08\x0b-\x1f\x7f\x9b]/g, '');
}

/** One line, at most `max` characters, with an ellipsis when cut. */
export function oneLine(text: string, max: number): string {
  const flat = printable(text.replace(/\s+/g, ' ').trim());
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/**
 * A tool call as one short line: `terminal(command: "npm test")`, each argument cut so the
 * whole fits a terminal line.
 */
export function describeCall(name: string, args: Record<string, unknown>, max = 80): string {
  const parts = Object.entries(args).map(([key, value]) => `${key}: ${typeof value === 'string' ? JSON.stringify(oneLine(value, 60)) : oneLine(JSON.stringify(value) ?? 'null', 40)}`);
  return oneLine(`${name}(${parts.join(', ')})`, max);
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s`;
}

/** Rows as aligned columns (the last column is not padded). */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? '').length)));
  return all.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n');
}
