import { posix } from 'node:path';

/** Content types by extension for downloads; anything else is application/octet-stream. */
const BY_EXTENSION: Record<string, string> = {
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  log: 'text/plain; charset=utf-8',
  json: 'application/json',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  toml: 'application/toml',
  xml: 'application/xml',
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  xhtml: 'application/xhtml+xml',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  ts: 'text/plain; charset=utf-8',
  py: 'text/x-python; charset=utf-8',
  sh: 'text/x-shellscript; charset=utf-8',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  ico: 'image/vnd.microsoft.icon',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  tgz: 'application/gzip',
  tar: 'application/x-tar',
  wasm: 'application/wasm',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  wav: 'audio/wav',
};

/** Types a browser would run as a page or script if it opened them inline: downloaded as attachments. */
const ACTIVE = new Set(['text/html', 'application/xhtml+xml', 'image/svg+xml', 'application/xml', 'text/javascript', 'application/wasm']);

export interface DownloadHeaders {
  contentType: string;
  /** True when the file must be sent as an attachment, never rendered inline. */
  attachment: boolean;
}

export function downloadHeaders(path: string): DownloadHeaders {
  const ext = posix.extname(path).slice(1).toLowerCase();
  const contentType = BY_EXTENSION[ext] ?? 'application/octet-stream';
  return { contentType, attachment: ACTIVE.has(contentType.split(';')[0]) };
}

/** `attachment; filename=...` with the name quoted safely (ASCII fallback and RFC 5987 UTF-8). */
export function attachmentDisposition(path: string): string {
  const name = posix.basename(path);
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}
