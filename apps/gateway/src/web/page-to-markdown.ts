import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';

export interface ReadablePage {
  title: string | null;
  markdown: string;
  /** Readability found an article; otherwise the whole body was converted. */
  article: boolean;
}

/**
 * A web page as Markdown: Mozilla Readability picks the main content (navigation, footers,
 * sidebars and scripts go), Turndown writes it as Markdown. Pages where Readability finds
 * no article are converted whole, minus scripts and styles.
 */
export function htmlToMarkdown(html: string, url: string): ReadablePage {
  const { document } = parseHTML(html);
  const title = document.querySelector('title')?.textContent?.trim() || null;
  // Readability resolves relative links against the document's URL.
  if (!document.querySelector('base')) {
    const base = document.createElement('base');
    base.setAttribute('href', url);
    document.head?.appendChild(base);
  }
  const parsed = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0], { charThreshold: 200 }).parse();
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  turndown.remove(['script', 'style', 'noscript', 'iframe']);
  if (parsed?.content) {
    return { title: parsed.title || title, markdown: tidy(turndown.turndown(parsed.content)), article: true };
  }
  const body = parseHTML(html).document.body;
  return { title, markdown: tidy(turndown.turndown(body?.innerHTML ?? '')), article: false };
}

/** Blank-line runs collapsed; Turndown's `-   item` becomes `- item` outside code blocks. */
function tidy(markdown: string): string {
  return markdown
    .split(/(^```[^\n]*\n[\s\S]*?^```$)/m)
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/^(\s*)([-*]|\d+\.) {2,}/gm, '$1$2 ').replace(/\n{3,}/g, '\n\n')))
    .join('')
    .trim();
}
