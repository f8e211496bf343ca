/**
 * Splits a text file into overlapping runs of lines. Line ranges are what rag_search
 * reports, so they must be exact: 1-based, inclusive, counting `\n` as the line break.
 */
export interface Chunk {
  startLine: number;
  endLine: number;
  content: string;
}

export interface ChunkOptions {
  maxLines: number;
  maxChars: number;
  /** Lines repeated at the start of the next chunk, so a passage cut in two is whole in one of them. */
  overlapLines: number;
  /** A single line longer than maxChars (minified code) is cut into at most this many pieces. */
  maxPiecesPerLine: number;
}

export const DEFAULT_CHUNKING: ChunkOptions = { maxLines: 60, maxChars: 4_000, overlapLines: 10, maxPiecesPerLine: 16 };

export function chunkLines(text: string, options: ChunkOptions = DEFAULT_CHUNKING): Chunk[] {
  const lines = text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop(); // the final newline ends a line, it does not start one
  const chunks: Chunk[] = [];
  let start = 0;
  while (start < lines.length) {
    let end = start;
    let chars = 0;
    while (end < lines.length && end - start < options.maxLines) {
      const size = lines[end].length + 1;
      if (end > start && chars + size > options.maxChars) break;
      chars += size;
      end++;
    }
    if (end - start === 1 && lines[start].length > options.maxChars) {
      chunks.push(...splitLongLine(lines[start], start + 1, options));
    } else {
      const content = lines.slice(start, end).join('\n');
      if (content.trim()) chunks.push({ startLine: start + 1, endLine: end, content });
    }
    if (end >= lines.length) break;
    const overlap = Math.min(options.overlapLines, Math.floor((end - start) / 3));
    start = Math.max(end - overlap, start + 1);
  }
  return chunks;
}

function splitLongLine(line: string, lineNumber: number, options: ChunkOptions): Chunk[] {
  const pieces: Chunk[] = [];
  for (let at = 0; at < line.length && pieces.length < options.maxPiecesPerLine; at += options.maxChars) {
    const content = line.slice(at, at + options.maxChars);
    if (content.trim()) pieces.push({ startLine: lineNumber, endLine: lineNumber, content });
  }
  return pieces;
}
