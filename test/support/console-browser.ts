import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, chromium, Page } from 'playwright-core';
import { findChromium } from '../../apps/gateway/src/web/browser/chromium-path';

/** Where the console tests leave a screenshot of each screen (gitignored). */
export const CONSOLE_ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts', 'console');

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[]; failureSummary?: string }>;
}

/** Debian's Chromium, headless, as the browser tool runs it (toolchain notes). */
export async function launchChromium(): Promise<Browser> {
  const executablePath = findChromium(process.env.RUNBOX_BROWSER_EXECUTABLE);
  if (!executablePath) throw new Error('no Chromium found: scripts/infra.sh installs Debian’s chromium');
  return chromium.launch({ executablePath, headless: true, chromiumSandbox: false, args: ['--disable-gpu', '--disable-background-networking', '--no-first-run'] });
}

/** Saves a full-page screenshot of the screen as test-artifacts/console/NAME.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(CONSOLE_ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(CONSOLE_ARTIFACTS, `${name}.png`), fullPage: true });
}

/**
 * Runs axe-core on the page as it is and returns the serious and critical violations. axe is
 * evaluated through the DevTools protocol, which the page's script-src policy does not govern
 * (a <script> tag with it would be refused, as it should be).
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  const loaded = await page.evaluate('typeof window.axe');
  if (loaded === 'undefined') await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    "window.axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })) })))",
  )) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
