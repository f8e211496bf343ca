import { z } from 'zod';

export type SearchProviderName = 'searxng' | 'brave' | 'tavily' | 'exa';

export interface SearchHit {
  title: string;
  url: string;
  snippet: string;
}

/** One HTTP request to a provider, and how to read its answer. */
export interface SearchRequest {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

export interface SearchProvider {
  name: SearchProviderName;
  request(query: string, maxResults: number): SearchRequest;
  parse(json: unknown): SearchHit[];
}

const DEFAULT_ENDPOINTS: Record<SearchProviderName, string | undefined> = {
  searxng: undefined, // self-hosted: RUNBOX_WEB_SEARCH_URL names it
  brave: 'https://api.search.brave.com/res/v1/web/search',
  tavily: 'https://api.tavily.com/search',
  exa: 'https://api.exa.ai/search',
};

const text = z.string().catch('');

const searxngAnswer = z.object({ results: z.array(z.object({ title: text, url: z.string(), content: text }).passthrough()).catch([]) });
const braveAnswer = z.object({
  web: z.object({ results: z.array(z.object({ title: text, url: z.string(), description: text }).passthrough()).catch([]) }).catch({ results: [] }),
});
const tavilyAnswer = z.object({ results: z.array(z.object({ title: text, url: z.string(), content: text }).passthrough()).catch([]) });
const exaAnswer = z.object({
  results: z
    .array(z.object({ title: z.string().nullable().catch(''), url: z.string(), highlights: z.array(z.string()).catch([]), text: text }).passthrough())
    .catch([]),
});

/** Why a configuration cannot search, or null when it can. */
export function searchUnavailableReason(provider: SearchProviderName | undefined, endpoint: string | undefined, apiKey: string | undefined): string | null {
  if (!provider) return 'no search provider is configured (RUNBOX_WEB_SEARCH_PROVIDER)';
  if (!(endpoint ?? DEFAULT_ENDPOINTS[provider])) return `${provider} needs its endpoint in RUNBOX_WEB_SEARCH_URL`;
  if (provider !== 'searxng' && !apiKey) return `${provider} needs RUNBOX_WEB_SEARCH_API_KEY`;
  return null;
}

/** The provider a configuration names; call only when searchUnavailableReason is null. */
export function searchProvider(name: SearchProviderName, endpoint: string | undefined, apiKey: string | undefined): SearchProvider {
  const base = endpoint ?? DEFAULT_ENDPOINTS[name] ?? '';
  const key = apiKey ?? '';
  const json = { 'content-type': 'application/json', accept: 'application/json' };
  switch (name) {
    case 'searxng':
      return {
        name,
        request: (q) => ({ url: withQuery(searxngSearchUrl(base), { q, format: 'json' }), method: 'GET', headers: { accept: 'application/json' } }),
        parse: (j) => searxngAnswer.parse(j).results.map((r) => ({ title: r.title, url: r.url, snippet: r.content })),
      };
    case 'brave':
      return {
        name,
        request: (q, n) => ({ url: withQuery(base, { q, count: String(Math.min(n, 20)) }), method: 'GET', headers: { accept: 'application/json', 'x-subscription-token': key } }),
        parse: (j) => braveAnswer.parse(j).web.results.map((r) => ({ title: r.title, url: r.url, snippet: r.description })),
      };
    case 'tavily':
      return {
        name,
        request: (q, n) => ({ url: base, method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ query: q, max_results: n }) }),
        parse: (j) => tavilyAnswer.parse(j).results.map((r) => ({ title: r.title, url: r.url, snippet: r.content })),
      };
    case 'exa':
      return {
        name,
        request: (q, n) => ({
          url: base,
          method: 'POST',
          headers: { ...json, 'x-api-key': key },
          body: JSON.stringify({ query: q, numResults: n, contents: { highlights: { numSentences: 2 } } }),
        }),
        parse: (j) => exaAnswer.parse(j).results.map((r) => ({ title: r.title ?? '', url: r.url, snippet: r.highlights.join(' … ') || r.text.slice(0, 300) })),
      };
  }
}

/** A SearXNG base URL (`https://searx.example`) or its search endpoint, either works. */
function searxngSearchUrl(base: string): string {
  const url = new URL(base);
  if (!url.pathname.endsWith('/search')) url.pathname = `${url.pathname.replace(/\/$/, '')}/search`;
  return url.toString();
}

function withQuery(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}
