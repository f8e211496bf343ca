/**
 * Turns what a model or a person typed into the pieces the Postgres searches use. Shared by
 * memory, session_search and rag_search so the three rank the same way:
 *
 * - `allTerms` (every word, as a prefix) ranks first: rows that contain the whole query;
 * - `anyTerms` (any word) finds the rest, ranked by ts_rank, so a verbose question still
 *   finds a fact that shares only its key words;
 * - `likePattern` and `text` feed the fallback for text the full-text parser cannot split
 *   (Chinese or Japanese runs, fragments of words): substring matches everywhere, and
 *   trigram similarity (typos) for memories, which are short.
 *
 * Words are runs of letters, digits and marks, so nothing a user types can inject tsquery
 * syntax. With `splitIdentifiers`, `getUserName` also yields `get`, `user`, `name`; the
 * RAG index splits document text the same way (identifierWords), so both sides agree.
 */
export interface TextQuery {
  text: string;
  terms: string[];
  anyTerms: string | null;
  allTerms: string | null;
  likePattern: string;
}

const MAX_TERMS = 24;
const MAX_TERM_LENGTH = 64;
/** Shorter terms match exactly: `go:*` would match every word starting with "go". */
const MIN_PREFIX_LENGTH = 3;
const WORD = /[\p{L}\p{N}\p{M}]+/gu;

/** Common English words that would match almost every row; dropped unless nothing else is left. */
const STOPWORDS = new Set(
  (
    'a an and are as at be been but by can could did do does for from had has have how i if in into is it its ' +
    'me my no not of on or our so such than that the their them then there these they this to was we were what ' +
    'when where which while who why will with would you your'
  ).split(' '),
);

export function parseTextQuery(input: string, options: { splitIdentifiers?: boolean } = {}): TextQuery {
  const text = input.trim().replace(/\s+/g, ' ');
  const words = options.splitIdentifiers ? identifierWords(text).split(' ') : (text.match(WORD) ?? []);
  const unique = [...new Set(words.filter(Boolean).map((w) => w.toLowerCase().slice(0, MAX_TERM_LENGTH)))];
  const meaningful = unique.filter((w) => !STOPWORDS.has(w));
  const terms = (meaningful.length > 0 ? meaningful : unique).slice(0, MAX_TERMS);
  const asPrefix = (t: string) => (t.length >= MIN_PREFIX_LENGTH ? `${t}:*` : t);
  return {
    text,
    terms,
    anyTerms: terms.length ? terms.map(asPrefix).join(' | ') : null,
    allTerms: terms.length ? terms.map(asPrefix).join(' & ') : null,
    likePattern: `%${escapeLike(text)}%`,
  };
}

/**
 * The words of `text` for a 'simple' tsvector: every run of letters and digits, and for
 * identifiers with humps (`getUserName`, `HTTPServer`) their parts as well. Separators such
 * as `_`, `.`, `/` and `-` split words, so `foo_bar.baz()` gives `foo bar baz`. Digits stay
 * with the letters before them (`utf8`, `Server2`), and one-letter parts are dropped: they
 * would match nearly everything.
 */
export function identifierWords(text: string): string {
  const out: string[] = [];
  for (const word of text.match(WORD) ?? []) {
    out.push(word);
    const parts = (word.match(/\p{Lu}+(?!\p{Ll})\p{N}*|\p{Lu}?\p{Ll}+\p{N}*|\p{N}+|[^\p{Lu}\p{Ll}\p{N}]+/gu) ?? []).filter((p) => p.length > 1);
    if (parts.length > 1) out.push(...parts);
  }
  return out.join(' ');
}

export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** A window of `text` around the first case-insensitive occurrence of `needle`, for snippets. */
export function snippetAround(text: string, needle: string, width = 160): string {
  const at = text.toLowerCase().indexOf(needle.toLowerCase());
  const flat = (s: string) => s.replace(/\s+/g, ' ');
  if (at < 0) return flat(text.slice(0, width * 2)) + (text.length > width * 2 ? ' …' : '');
  const start = Math.max(0, at - width);
  const end = Math.min(text.length, at + needle.length + width);
  const match = text.slice(at, at + needle.length);
  return (
    (start > 0 ? '… ' : '') +
    flat(text.slice(start, at)) +
    `**${match}**` +
    flat(text.slice(at + needle.length, end)) +
    (end < text.length ? ' …' : '')
  );
}
