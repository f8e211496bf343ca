import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressRefusedError, FetchFailedError, guardedFetch, NO_DOMAIN_RULES } from '@app/egress';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { applyOutputBudget } from '../tools/output-budget';
import { Outbound, USER_AGENT } from './outbound';
import { SearchHit, SearchProvider, searchProvider, searchUnavailableReason } from './search-providers';

const MAX_ANSWER_BYTES = 2 * 1024 * 1024;
const SNIPPET_CHARS = 500;

const parameters = z
  .object({
    query: z.string().trim().min(1).max(2000).describe('What to search the web for.'),
    max_results: z.number().int().min(1).max(20).optional().describe('How many results (default 8).'),
  })
  .strict();

type WebSearchArgs = z.infer<typeof parameters>;

/** web_search: ranked results (title, URL, snippet) from the configured provider. */
@Injectable()
export class WebSearchTool implements GatewayTool {
  readonly definition = {
    name: 'web_search',
    description:
      'Search the web. Returns ranked results, each with a title, URL and snippet. Follow up with web_fetch on the results worth reading.',
    parameters,
    mutating: false,
    toolsets: ['research' as const, 'browser' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 90,
  };

  private readonly provider: SearchProvider | null;
  private readonly unavailable: string | null;

  constructor(
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
    private readonly outbound: Outbound,
  ) {
    const { RUNBOX_WEB_SEARCH_PROVIDER: name, RUNBOX_WEB_SEARCH_URL: url, RUNBOX_WEB_SEARCH_API_KEY: key } = config;
    this.unavailable = searchUnavailableReason(name, url, key);
    this.provider = name && !this.unavailable ? searchProvider(name, url, key) : null;
  }

  /** Not offered without a provider; the reason says what to configure. */
  unavailableReason(): string | undefined {
    return this.unavailable ?? undefined;
  }

  async execute(ctx: GatewayToolContext, args: WebSearchArgs): Promise<GatewayToolResult> {
    if (!this.provider) return toolFailure(`web_search is not available: ${this.unavailable}.`, { error_code: 'not_configured' });
    const wanted = args.max_results ?? 8;
    const req = this.provider.request(args.query, wanted);
    let hits: SearchHit[];
    try {
      // The provider is the operator's choice, so the tenant's domain rules do not apply to it;
      // the address rules do (an intranet SearXNG must be named in RUNBOX_ALLOW_PRIVATE_HOSTS).
      const res = await guardedFetch(this.outbound.guard, req.url, {
        rules: NO_DOMAIN_RULES,
        method: req.method,
        headers: { 'user-agent': USER_AGENT, ...req.headers },
        body: req.body,
        timeoutMs: ctx.timeoutMs,
        maxBytes: MAX_ANSWER_BYTES,
        maxRedirects: 3,
        signal: ctx.signal,
      });
      if (res.status >= 400) {
        return toolFailure(`${this.provider.name} answered HTTP ${res.status}: ${res.body.subarray(0, 500).toString('utf8')}`, { provider: this.provider.name, status: res.status });
      }
      hits = this.provider.parse(JSON.parse(res.body.toString('utf8')));
    } catch (err) {
      if (err instanceof EgressRefusedError || err instanceof FetchFailedError) {
        return toolFailure(`Search failed (${this.provider.name}): ${err.message}`, { provider: this.provider.name, error_code: err.code });
      }
      if (err instanceof SyntaxError) return toolFailure(`${this.provider.name} did not answer JSON`, { provider: this.provider.name });
      throw err;
    }
    const results = hits.filter((h) => /^https?:\/\//i.test(h.url)).slice(0, wanted);
    const lines = [`${results.length} results from ${this.provider.name} for "${args.query}":`];
    results.forEach((h, i) => lines.push('', `${i + 1}. ${oneLine(h.title) || h.url}`, `   ${h.url}`, ...(h.snippet ? [`   ${oneLine(h.snippet).slice(0, SNIPPET_CHARS)}`] : [])));
    return toolOutput(applyOutputBudget(lines.join('\n'), ctx.maxOutputChars), {
      provider: this.provider.name,
      results: results.map((h, i) => ({ rank: i + 1, title: h.title, url: h.url, snippet: h.snippet.slice(0, SNIPPET_CHARS) })),
    });
  }
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}
