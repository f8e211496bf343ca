import { identifierWords, parseTextQuery, snippetAround } from './text-query';

describe('parseTextQuery', () => {
  it('keeps the meaningful words, lowercased and once each, as prefixes when long enough', () => {
    const q = parseTextQuery('  Which PORT does the staging  database use? port ');
    expect(q.text).toBe('Which PORT does the staging database use? port');
    expect(q.terms).toEqual(['port', 'staging', 'database', 'use']);
    expect(q.anyTerms).toBe('port:* | staging:* | database:* | use:*');
    expect(q.allTerms).toBe('port:* & staging:* & database:* & use:*');
  });

  it('keeps stopwords when nothing else is left, and short words exact', () => {
    expect(parseTextQuery('to be or not to be').terms).toEqual(['to', 'be', 'or', 'not']);
    expect(parseTextQuery('go db').anyTerms).toBe('go | db');
  });

  it('lets no tsquery syntax through, whatever is typed', () => {
    const q = parseTextQuery("foo & bar | !baz:* <-> 'qux' (x)");
    expect(q.terms).toEqual(['foo', 'bar', 'baz', 'qux', 'x']);
    expect(q.anyTerms).toBe("foo:* | bar:* | baz:* | qux:* | x");
  });

  it('has no terms for punctuation alone, and escapes LIKE wildcards', () => {
    const q = parseTextQuery('%_\\');
    expect(q.terms).toEqual([]);
    expect(q.anyTerms).toBeNull();
    expect(q.likePattern).toBe('%\\%\\_\\\\%');
  });

  it('treats a run of Chinese characters as one word', () => {
    expect(parseTextQuery('数据库 密码').terms).toEqual(['数据库', '密码']);
  });

  it('splits identifiers when asked, as the retrieval index does', () => {
    expect(parseTextQuery('getUserName', { splitIdentifiers: true }).terms).toEqual(['getusername', 'get', 'user', 'name']);
  });
});

describe('identifierWords', () => {
  it('adds the humps of camelCase and acronyms, and splits on separators', () => {
    expect(identifierWords('getUserName HTTPServer2 foo_bar.baz() utf8 zq0421x')).toBe(
      'getUserName get User Name HTTPServer2 HTTP Server2 foo bar baz utf8 zq0421x',
    );
  });

  it('leaves plain words and other scripts alone', () => {
    expect(identifierWords('plain Ärger 数据库')).toBe('plain Ärger 数据库');
  });
});

describe('snippetAround', () => {
  it('marks the match and cuts around it', () => {
    const text = `${'a '.repeat(200)}the Needle here ${'b '.repeat(200)}`;
    const snippet = snippetAround(text, 'needle', 20);
    expect(snippet).toMatch(/^… .*\*\*Needle\*\*.* …$/);
    expect(snippet.length).toBeLessThan(70);
  });
});
