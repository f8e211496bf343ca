import { htmlToMarkdown } from './page-to-markdown';

const paragraph = 'A paragraph of the article, long enough to count as content for Readability to keep it. '.repeat(3);

describe('htmlToMarkdown', () => {
  it('keeps the article with its structure and drops the page around it', () => {
    const html = `<html><head><title>Title here</title></head><body>
      <nav><a href="/a">Menu entry one</a><a href="/b">Menu entry two</a></nav>
      <article><h2>Section</h2><p>${paragraph}</p><ul><li>first point</li><li>second point</li></ul>
      <p>See <a href="/docs">the docs</a>.</p><pre><code>npm test</code></pre><p>${paragraph}</p></article>
      <footer>All rights reserved</footer><script>tracker()</script></body></html>`;
    const page = htmlToMarkdown(html, 'https://site.example/post');
    expect(page).toMatchObject({ title: 'Title here', article: true });
    expect(page.markdown).toContain('## Section');
    expect(page.markdown).toMatch(/^- first point$/m);
    expect(page.markdown).toContain('[the docs](https://site.example/docs)');
    expect(page.markdown).toContain('```\nnpm test\n```');
    for (const noise of ['Menu entry', 'All rights reserved', 'tracker()']) expect(page.markdown).not.toContain(noise);
  });

  it('converts a page without an article whole, minus scripts', () => {
    const page = htmlToMarkdown('<html><body><p>Just a line</p><script>x()</script></body></html>', 'https://a.example/');
    expect(page.markdown).toBe('Just a line');
  });
});
