// Bundles the console (src/main.tsx, React) into dist/console: app.js, app.css and index.html.
// `npm run build` runs it beside `nest build`; it takes well under a second.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', 'dist', 'console');
const started = Date.now();
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(here, 'src', 'main.tsx') },
  outdir: out,
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(join(here, 'src', 'index.html'), join(out, 'index.html'));
if (process.argv.includes('--verbose')) console.log(`console built in ${Date.now() - started} ms`);
