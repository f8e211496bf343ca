/**
 * Text Postgres cannot store: NUL (U+0000) in `text` and `jsonb`, and a lone UTF-16
 * surrogate, which has no UTF-8 form (`jsonb` refuses its `\ud800` escape; a `text` column
 * would silently get U+FFFD). JSON and JavaScript strings allow both, so every string from a
 * request, a model or a sandbox can carry them.
 */
// eslint-disable-next-line no-control-regex -- NUL is exactly what it looks for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

export interface UnstorableText {
  /** Where it is: `body.metadata.team`; for a bad object key, the object holding it. */
  field: string;
  message: string;
}

/** What is wrong with `text`, or undefined when it can be stored. */
export function unstorableProblem(text: string): string | undefined {
  const found = UNSTORABLE.exec(text);
  if (!found) return undefined;
  if (found[0] === '\u0000') return 'contains a NUL character (U+0000), which is not allowed in text';
  const code = found[0].charCodeAt(0).toString(16).toUpperCase();
  return `contains a lone surrogate (U+${code}), which is not valid Unicode text`;
}

/**
 * The first string or object key anywhere in `value` that cannot be stored, named by its
 * path from `root`. Iterative, so a deeply nested value cannot exhaust the stack.
 */
export function findUnstorableText(value: unknown, root: string): UnstorableText | undefined {
  const stack: Array<{ value: unknown; field: string }> = [{ value, field: root }];
  while (stack.length > 0) {
    const { value: current, field } = stack.pop()!;
    if (typeof current === 'string') {
      const problem = unstorableProblem(current);
      if (problem) return { field, message: problem };
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], field: `${field}.${i}` });
    } else if (current !== null && typeof current === 'object') {
      const entries = Object.entries(current);
      for (const [key] of entries) {
        const problem = unstorableProblem(key);
        // The key is not echoed: the object holding it is named instead.
        if (problem) return { field, message: `a key ${problem}` };
      }
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i][1], field: `${field}.${entries[i][0]}` });
    }
  }
  return undefined;
}

/** `text` with each NUL and lone surrogate replaced by U+FFFD, for text that is kept whatever it holds. */
export function toStorableText(text: string): string {
  return UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\ufffd') : text;
}
