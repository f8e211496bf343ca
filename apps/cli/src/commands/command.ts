import type { ParseArgsConfig } from 'node:util';
import { CliContext, UsageError } from '../context';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type OptionValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

/** One `runbox` command: its options, its help, and what it does; it returns the exit code. */
export interface Command {
  name: string;
  summary: string;
  usage: string;
  options?: OptionSpec;
  run(ctx: CliContext, values: OptionValues, positionals: string[], rest: string[]): Promise<number>;
}

export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

export function intOption(values: OptionValues, name: string, min: number, max: number): number | undefined {
  const text = stringOption(values, name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}`);
  return value;
}
