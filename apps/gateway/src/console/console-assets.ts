import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** One file of the built console, held in memory (the whole bundle is a few hundred KB). */
export interface ConsoleAsset {
  contentType: string;
  body: Buffer;
}

/** The files `npm run build` writes to dist/console (apps/console/build.mjs); nothing else is served. */
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/**
 * Finds dist/console above this file: the gateway runs from dist/apps/gateway/... in
 * production and the image, and from apps/gateway/src in tests, and both sit below the
 * folder that holds dist/. Null when the console was not built.
 */
export function findConsoleDir(from = __dirname): string | null {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'dist', 'console');
    if (existsSync(join(candidate, 'index.html'))) return candidate;
    if (dirname(dir) === dir) return null;
  }
}

/** Reads the console's files once; a fixed list, so no request path ever reaches the file system. */
export function loadConsoleAssets(dir: string | null): Map<string, ConsoleAsset> {
  const assets = new Map<string, ConsoleAsset>();
  if (!dir) return assets;
  for (const [name, contentType] of Object.entries(FILES)) {
    const path = join(dir, name);
    if (existsSync(path)) assets.set(name, { contentType, body: readFileSync(path) });
  }
  return assets;
}

/**
 * Scripts only from the gateway's own origin (no inline script, no eval), styles likewise;
 * images also from data: and blob: URLs (the file viewer shows workspace images as blobs it
 * fetched with the key); requests only to the same origin; never framed.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
