import { AuthenticationError, DEFAULT_BASE_URL, Runbox } from '@runbox/sdk';
import { readConfig, writeConfig } from '../config';
import { UsageError } from '../context';
import { EXIT } from '../exit-codes';
import { ask } from '../prompt';
import { Command } from './command';

export const loginCommand: Command = {
  name: 'login',
  summary: 'store the gateway address and an API key for later commands',
  usage: 'runbox login [--base-url URL] [--api-key KEY]   (asks on a terminal for what is not given)',
  async run(ctx) {
    const path = ctx.configPath;
    const stored = await readConfig(path);
    let baseUrl = ctx.flags.baseUrl ?? ctx.io.env.RUNBOX_BASE_URL;
    let apiKey = ctx.flags.apiKey ?? ctx.io.env.RUNBOX_API_KEY;
    if (!baseUrl && ctx.interactive) baseUrl = (await ask(ctx.io.stdin, ctx.io.stderr, `gateway address [${stored.base_url ?? DEFAULT_BASE_URL}]: `)) || undefined;
    baseUrl ??= stored.base_url ?? DEFAULT_BASE_URL;
    if (!apiKey && ctx.interactive) apiKey = (await ask(ctx.io.stdin, ctx.io.stderr, 'API key: ')) || undefined;
    if (!apiKey) throw new UsageError('login needs an API key: pass --api-key or run it on a terminal');
    try {
      new URL(baseUrl);
    } catch {
      throw new UsageError(`${baseUrl} is not a URL (e.g. http://localhost:8080)`);
    }
    // Checked before it is stored, so a typo does not surface later as a confusing 401.
    try {
      await new Runbox({ apiKey, baseUrl }).tools();
    } catch (err) {
      if (err instanceof AuthenticationError) throw new UsageError(`${baseUrl} does not accept this API key`);
      throw err;
    }
    await writeConfig(path, { base_url: baseUrl, api_key: apiKey });
    if (ctx.flags.json) ctx.printJson({ base_url: baseUrl, config: path });
    else ctx.note(`logged in to ${baseUrl}; saved in ${path}`);
    return EXIT.ok;
  },
};
