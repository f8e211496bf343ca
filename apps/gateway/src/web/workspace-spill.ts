import { createHash } from 'node:crypto';
import { SandboxFileReader } from '../tools/sandbox-files';

/** Room kept for the footer that says where the rest is. */
const FOOTER_ROOM = 500;
/** How far into a file read_file reaches (the sandbox agent's READ_CAP_BYTES). */
const READ_FILE_REACH_BYTES = 400 * 1024;

/** Where a long text of `url` goes in the workspace: `.runbox/web/<host>-<hash>.<ext>`. */
export function spillPath(url: string, ext: string, salt = ''): string {
  let host = 'page';
  try {
    host = new URL(url).hostname.replace(/[^a-z0-9.-]/gi, '_').slice(0, 80) || host;
  } catch {
    // keep the neutral name
  }
  const hash = createHash('sha256').update(url + salt).digest('hex').slice(0, 12);
  return `.runbox/web/${host}-${hash}.${ext}`;
}

export type SpillOutcome =
  | { spilled: false; output: string }
  | { spilled: true; output: string; path: string; totalChars: number; totalLines: number; nextOffset: number }
  | { spilled: false; output: string; error: string };

/**
 * A text that fits the budget is returned as it is. A longer one is written whole into the
 * workspace through the sandbox (so the agent's path containment holds) and the answer is
 * its head, cut at a line, and a footer naming the file, its size and the read_file offset
 * where the head stops.
 */
export async function fitOrSpill(files: SandboxFileReader, text: string, budget: number, path: string): Promise<SpillOutcome> {
  if (text.length <= budget) return { spilled: false, output: text };
  const written = await files.write(path, Buffer.from(text, 'utf8'));
  const lines = text.split('\n');
  const room = Math.max(budget - FOOTER_ROOM, 200);
  if (!written.ok) {
    const head = text.slice(0, room);
    return { spilled: false, output: `${head}\n… cut at ${room} of ${text.length} characters (the whole text could not be saved: ${written.message})`, error: written.message };
  }
  let used = 0;
  let count = 0;
  while (count < lines.length && used + lines[count].length + 1 <= room) used += lines[count++].length + 1;
  // A first line longer than the budget is cut inside itself; read_file starts again at line 1.
  const head = count > 0 ? lines.slice(0, count).join('\n') : text.slice(0, room);
  const nextOffset = count > 0 ? count + 1 : 1;
  const footer =
    `\n\n… ${text.length - head.length} more characters. The whole page (${text.length} characters, ${lines.length} lines) ` +
    `is in ${written.path}: read_file path="${written.path}" offset=${nextOffset} continues where this stops.` +
    (Buffer.byteLength(text) > READ_FILE_REACH_BYTES ? ' read_file reaches its first 400 KB; grep finds text in the rest.' : '');
  return { spilled: true, output: head + footer, path: written.path, totalChars: text.length, totalLines: lines.length, nextOffset };
}
