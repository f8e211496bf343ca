import { searchProvider, searchUnavailableReason } from './search-providers';

describe('search providers', () => {
  it('say why a configuration cannot search', () => {
    expect(searchUnavailableReason(undefined, undefined, undefined)).toMatch(/RUNBOX_WEB_SEARCH_PROVIDER/);
    expect(searchUnavailableReason('searxng', undefined, undefined)).toMatch(/RUNBOX_WEB_SEARCH_URL/);
    expect(searchUnavailableReason('brave', undefined, undefined)).toMatch(/RUNBOX_WEB_SEARCH_API_KEY/);
    expect(searchUnavailableReason('searxng', 'http://searx.internal', undefined)).toBeNull();
    expect(searchUnavailableReason('tavily', undefined, 'k')).toBeNull();
  });

  it('build each provider request with its key where the provider expects it', () => {
    expect(searchProvider('searxng', 'http://searx.internal/', undefined).request('a b', 5).url).toBe('http://searx.internal/search?q=a+b&format=json');
    const brave = searchProvider('brave', undefined, 'bk').request('q', 30);
    expect(brave).toMatchObject({ method: 'GET', headers: { 'x-subscription-token': 'bk' } });
    expect(brave.url).toBe('https://api.search.brave.com/res/v1/web/search?q=q&count=20');
    const tavily = searchProvider('tavily', undefined, 'tk').request('q', 3);
    expect(tavily).toMatchObject({ method: 'POST', headers: { authorization: 'Bearer tk' } });
    expect(JSON.parse(tavily.body!)).toEqual({ query: 'q', max_results: 3 });
    expect(searchProvider('exa', undefined, 'ek').request('q', 2).headers['x-api-key']).toBe('ek');
  });

  it('read each provider answer as ranked hits, tolerating missing fields', () => {
    expect(searchProvider('brave', undefined, 'k').parse({ web: { results: [{ title: 'T', url: 'https://a', description: 'D' }, { url: 'https://b' }] } })).toEqual([
      { title: 'T', url: 'https://a', snippet: 'D' },
      { title: '', url: 'https://b', snippet: '' },
    ]);
    expect(searchProvider('tavily', undefined, 'k').parse({ results: [{ title: 'T', url: 'https://a', content: 'C' }] })).toEqual([{ title: 'T', url: 'https://a', snippet: 'C' }]);
    expect(searchProvider('exa', undefined, 'k').parse({ results: [{ title: null, url: 'https://a', highlights: ['one', 'two'] }] })).toEqual([
      { title: '', url: 'https://a', snippet: 'one … two' },
    ]);
    expect(searchProvider('searxng', 'http://s', undefined).parse({ nothing: true })).toEqual([]);
  });
});
