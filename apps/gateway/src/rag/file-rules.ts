/** What rag_index reads and what it leaves out. */

/** Larger files are skipped: they are data or generated, and a read must fit one NATS message. */
export const MAX_FILE_BYTES = 512 * 1024;
/** One rag_index call indexes at most this many files of a folder. */
export const MAX_FILES = 20_000;

/** Folders of installed dependencies and caches: never the project's own text. */
const DEPENDENCY_FOLDERS = new Set(['node_modules', '__pycache__', 'site-packages', 'bower_components']);

/**
 * Whether a file found under an indexed folder is left out: anything inside a hidden
 * (dot) folder or a dependency folder below that root, and hidden files. Naming such a path
 * as the root itself indexes it.
 */
export function isIgnored(relativeToRoot: string): boolean {
  const parts = relativeToRoot.split('/');
  return parts.some((p) => p.startsWith('.') || DEPENDENCY_FOLDERS.has(p));
}

export type DecodedFile = { kind: 'text'; text: string } | { kind: 'binary' };

/** UTF-8 text, or binary when there is a NUL byte (Postgres text cannot hold one) or the bytes are not valid UTF-8. */
export function decodeText(bytes: Buffer): DecodedFile {
  if (bytes.includes(0)) return { kind: 'binary' };
  try {
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
    return { kind: 'text', text };
  } catch {
    return { kind: 'binary' };
  }
}
