import { accessSync, constants } from 'node:fs';

/** Where distributions install Chromium (Debian's `chromium` package is the first). */
export const CHROMIUM_PATHS = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
  '/usr/bin/google-chrome-stable',
  '/snap/bin/chromium',
];

/** The Chromium to drive: the configured one, else the first usual path that is executable. */
export function findChromium(configured: string | undefined, candidates: string[] = CHROMIUM_PATHS): string | null {
  if (configured) return configured;
  for (const file of candidates) {
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}
