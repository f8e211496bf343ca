import { Runbox } from '@runbox/sdk';
import { configPath, readConfig } from './config';
import { colourEnabled, makeStyle, Style } from './terminal';

/** Where the CLI reads and writes; a test passes its own. */
export interface CliIO {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadStream;
  env: NodeJS.ProcessEnv;
}

/** The options every command takes. */
export interface GlobalFlags {
  json: boolean;
  noColor: boolean;
  baseUrl?: string;
  apiKey?: string;
}

/** A mistake in the command line: the message is shown with a hint to --help. */
export class UsageError extends Error {}

/** A command's environment: where to print, in which style, and the API client. */
export class CliContext {
  /** Style for stdout (results) and stderr (progress, prompts, errors): each is coloured only if it is a terminal. */
  readonly out: Style;
  readonly err: Style;

  constructor(
    readonly io: CliIO,
    readonly flags: GlobalFlags,
  ) {
    this.out = makeStyle(!flags.json && colourEnabled(io.stdout, io.env, flags.noColor));
    this.err = makeStyle(colourEnabled(io.stderr, io.env, flags.noColor));
  }

  print(text: string): void {
    this.io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  printJson(value: unknown): void {
    this.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  note(text: string): void {
    this.io.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** A person can answer questions: input and progress both on a terminal. */
  get interactive(): boolean {
    return this.io.stdin.isTTY === true && this.io.stderr.isTTY === true;
  }

  get configPath(): string {
    return configPath(this.io.env);
  }

  /** The client: flags first, then RUNBOX_BASE_URL / RUNBOX_API_KEY, then what `runbox login` stored. */
  async client(): Promise<Runbox> {
    const stored = await readConfig(this.configPath);
    const apiKey = this.flags.apiKey ?? this.io.env.RUNBOX_API_KEY ?? stored.api_key;
    const baseUrl = this.flags.baseUrl ?? this.io.env.RUNBOX_BASE_URL ?? stored.base_url;
    if (!apiKey) throw new UsageError("no API key: run 'runbox login', set RUNBOX_API_KEY, or pass --api-key");
    return new Runbox({ apiKey, baseUrl });
  }
}
