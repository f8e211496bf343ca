import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { Page } from 'playwright-core';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../../tools/gateway-tool';
import { SandboxFiles } from '../../tools/sandbox-files';
import { applyOutputBudget } from '../../tools/output-budget';
import { EgressRulesRepository } from '../egress-rules.repository';
import { fitOrSpill, spillPath } from '../workspace-spill';
import { BrowserPool } from './browser-pool';
import { BrowserSession } from './browser-session';
import { BrowserSettingsRepository } from './browser-settings.repository';
import { runPageScript, SCRIPT_RESULT_MAX_CHARS, ScriptResult, ScriptTimeoutError } from './page-script';

const ACTIONS = ['navigate', 'snapshot', 'click', 'type', 'select', 'press', 'back', 'screenshot', 'wait_for', 'tabs', 'evaluate'] as const;
/** The longest a single Playwright action waits (an element to appear, a load). */
const ACTION_TIMEOUT_MS = 30_000;
const REF = /^(f\d+)?e\d+$/;

const parameters = z
  .object({
    action: z.enum(ACTIONS),
    url: z.string().min(1).max(8192).optional().describe('navigate: the http(s) URL to open.'),
    ref: z.string().regex(REF, 'an element ref from the last snapshot, like e12').optional().describe('click/type/select/press: an element ref from the last snapshot, e.g. e12.'),
    text: z.string().max(100_000).optional().describe('type: the text to enter (replaces the field); wait_for: the text to wait for.'),
    key: z.string().max(100).optional().describe('press: a key such as Enter, Tab, ArrowDown or Control+A.'),
    values: z.array(z.string().max(1000)).max(100).optional().describe('select: the option values or labels to choose.'),
    tab: z.number().int().min(1).optional().describe('tabs: close the tab with this number (omit to list the tabs).'),
    expression: z
      .string()
      .min(1)
      .max(100_000)
      .optional()
      .describe('evaluate: JavaScript run in the page, an expression or a function (called; a promise is awaited); its result comes back as JSON.'),
  })
  .strict();

type BrowserArgs = z.infer<typeof parameters>;

/**
 * browser: a real headless Chromium, one context per session kept between calls (cookies
 * and logins stay), every request of its pages checked by the egress guard.
 */
@Injectable()
export class BrowserTool implements GatewayTool {
  readonly definition = {
    name: 'browser',
    description:
      'Drive a real headless browser (Chromium) for pages that need JavaScript, a login or a form; for reading a page web_fetch is faster and cheaper. Actions: navigate (url), snapshot (the page as an accessibility tree whose elements carry refs like e12), click/type/select/press on a ref from the last snapshot, back, screenshot (a PNG saved in the workspace), wait_for (text), tabs (list; with tab: close that one), evaluate (expression: run JavaScript in the page, only where the operator enabled it). Actions that change the page answer with a fresh snapshot. Cookies and logins stay for the rest of the session.',
    parameters,
    mutating: true,
    toolsets: ['research' as const, 'browser' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 120,
  };

  constructor(
    private readonly pool: BrowserPool,
    private readonly rules: EgressRulesRepository,
    private readonly files: SandboxFiles,
    private readonly settings: BrowserSettingsRepository,
  ) {}

  unavailableReason(): string | undefined {
    const availability = this.pool.availability();
    return availability.available ? undefined : availability.reason;
  }

  async execute(ctx: GatewayToolContext, args: BrowserArgs): Promise<GatewayToolResult> {
    const availability = this.pool.availability();
    if (!availability.available) return toolFailure(`The browser is not available: ${availability.reason}.`, { error_code: 'not_configured' });
    if (args.action === 'evaluate' && !(await this.settings.evaluateAllowed(ctx.tenantId))) {
      return toolFailure(
        'The evaluate action is turned off for this tenant: running script in pages needs an operator to enable it (browser_evaluate in the admin API). Use snapshot, click, type, select and press instead.',
        { action: 'evaluate', error_code: 'evaluate_not_enabled' },
      );
    }
    let opened: Awaited<ReturnType<BrowserPool['session']>>;
    try {
      opened = await this.pool.session(ctx.tenantId, ctx.sessionId);
    } catch (err) {
      return toolFailure(`The browser could not start: ${playwrightMessage(err)}`, { error_code: 'browser_unavailable' });
    }
    const { session, restarted } = opened;
    const timeout = Math.min(ACTION_TIMEOUT_MS, Math.max(ctx.timeoutMs - 5_000, 1_000));
    const files = this.files.reader({ ...ctx, callId: ctx.callId ?? `browser:${randomUUID()}`, timeoutMs: Math.min(ctx.timeoutMs, 60_000) });
    try {
      session.useRules(await this.rules.forTenant(ctx.tenantId));
    } catch (err) {
      session.endCall();
      throw err;
    }
    let result: GatewayToolResult;
    try {
      result = await this.act(session, args, timeout, ctx.maxOutputChars, files);
    } catch (err) {
      result = toolFailure(`${args.action} failed: ${playwrightMessage(err)}`, { action: args.action });
    } finally {
      session.endCall();
    }
    const over = await session.overLimit();
    if (over) await this.pool.release(ctx.tenantId, ctx.sessionId);
    const { blocked, notes } = session.takeReport();
    const extra = [
      ...(restarted ? ['Note: the browser had stopped and was restarted; this session\'s earlier tabs and cookies are gone.'] : []),
      ...notes,
      ...(over ? [`The browser context was closed because ${over}; the next call starts a fresh one.`] : []),
      ...(blocked.length ? ['Blocked requests (not allowed to leave):', ...blocked.map((b) => `- ${b.kind} ${b.url}: ${b.reason}`)] : []),
    ];
    const output = extra.length ? `${result.output}\n\n${extra.join('\n')}` : result.output;
    return {
      ...result,
      output: applyOutputBudget(output, ctx.maxOutputChars),
      metadata: { ...result.metadata, ...(blocked.length ? { blocked_requests: blocked } : {}), ...(restarted ? { restarted: true } : {}) },
      executorId: files.executorId ?? undefined,
    };
  }

  private async act(session: BrowserSession, args: BrowserArgs, timeout: number, budget: number, files: ReturnType<SandboxFiles['reader']>): Promise<GatewayToolResult> {
    const page = await session.page();
    const need = <T>(value: T | undefined, name: string): T => {
      if (value === undefined) throw new ArgumentMissing(`${args.action} needs ${name}`);
      return value;
    };
    try {
      switch (args.action) {
        case 'navigate': {
          const url = need(args.url, 'url');
          if (!/^https?:\/\//i.test(url)) return toolFailure('navigate takes an http(s) URL', { action: 'navigate' });
          const response = await page.goto(url, { waitUntil: 'domcontentloaded', timeout });
          const status = response ? ` (HTTP ${response.status()})` : '';
          return this.snapshot(page, budget, files, `Opened ${page.url()}${status}`);
        }
        case 'snapshot':
          return this.snapshot(page, budget, files, null);
        case 'click':
          await page.locator(`aria-ref=${need(args.ref, 'ref')}`).click({ timeout });
          return this.afterAction(page, budget, files, `Clicked ${args.ref}`, timeout);
        case 'type':
          await page.locator(`aria-ref=${need(args.ref, 'ref')}`).fill(need(args.text, 'text'), { timeout });
          return this.afterAction(page, budget, files, `Typed into ${args.ref}`, timeout);
        case 'select': {
          const chosen = await page.locator(`aria-ref=${need(args.ref, 'ref')}`).selectOption(need(args.values, 'values'), { timeout });
          return this.afterAction(page, budget, files, `Selected ${chosen.join(', ')} in ${args.ref}`, timeout);
        }
        case 'press': {
          const key = need(args.key, 'key');
          if (args.ref) await page.locator(`aria-ref=${args.ref}`).press(key, { timeout });
          else await page.keyboard.press(key);
          return this.afterAction(page, budget, files, `Pressed ${key}`, timeout);
        }
        case 'back': {
          const response = await page.goBack({ waitUntil: 'domcontentloaded', timeout });
          return this.snapshot(page, budget, files, response ? `Went back to ${page.url()}` : 'There is no earlier page in this tab');
        }
        case 'wait_for': {
          const text = need(args.text, 'text');
          await page.getByText(text).first().waitFor({ state: 'visible', timeout });
          return this.snapshot(page, budget, files, `"${text}" is on the page`);
        }
        case 'screenshot':
          return this.screenshot(page, files, timeout);
        case 'tabs':
          return this.tabs(session, args.tab);
        case 'evaluate':
          return this.evaluate(page, need(args.expression, 'expression'), timeout, budget, files);
      }
    } catch (err) {
      if (err instanceof ArgumentMissing) return toolFailure(err.message, { action: args.action });
      throw err;
    }
  }

  /** After a click or keypress the page may navigate: wait for it to settle, briefly. */
  private async afterAction(page: Page, budget: number, files: ReturnType<SandboxFiles['reader']>, done: string, timeout: number): Promise<GatewayToolResult> {
    await page.waitForLoadState('domcontentloaded', { timeout }).catch(() => undefined);
    return this.snapshot(page, budget, files, done);
  }

  private async snapshot(page: Page, budget: number, files: ReturnType<SandboxFiles['reader']>, done: string | null): Promise<GatewayToolResult> {
    const tree = await page.ariaSnapshot({ mode: 'ai', timeout: ACTION_TIMEOUT_MS });
    const title = await page.title().catch(() => '');
    const text = `${done ? `${done}\n` : ''}Page: ${title || '(untitled)'} — ${page.url()}\n\n${tree}`;
    const outcome = await fitOrSpill(files, text, budget, spillPath(page.url(), 'snapshot.txt', String(Date.now())));
    const meta: Record<string, unknown> = { url: page.url(), title };
    if (outcome.spilled) Object.assign(meta, { saved_to: outcome.path, chars: outcome.totalChars, next_offset: outcome.nextOffset });
    return toolOutput(outcome.output, meta);
  }

  /** The script's result as JSON; a long one is saved into the workspace like a long snapshot. */
  private async evaluate(page: Page, expression: string, timeout: number, budget: number, files: ReturnType<SandboxFiles['reader']>): Promise<GatewayToolResult> {
    let result: ScriptResult;
    try {
      result = await runPageScript(page, expression, timeout);
    } catch (err) {
      if (err instanceof ScriptTimeoutError) return toolFailure(`The script did not finish within ${Math.round(timeout / 1000)} s and was stopped.`, { action: 'evaluate', error_code: 'timeout' });
      throw err;
    }
    const cut = result.totalChars > result.json.length ? `\n… cut at ${SCRIPT_RESULT_MAX_CHARS} of ${result.totalChars} characters` : '';
    const text = `Result of the script on ${page.url()}:\n${result.json}${cut}`;
    const outcome = await fitOrSpill(files, text, budget, spillPath(page.url(), 'evaluate.txt', String(Date.now())));
    const meta: Record<string, unknown> = { url: page.url(), chars: result.totalChars };
    if (outcome.spilled) Object.assign(meta, { saved_to: outcome.path, next_offset: outcome.nextOffset });
    return toolOutput(outcome.output, meta);
  }

  private async screenshot(page: Page, files: ReturnType<SandboxFiles['reader']>, timeout: number): Promise<GatewayToolResult> {
    const png = await page.screenshot({ type: 'png', timeout });
    const path = `.runbox/browser/screenshot-${new Date().toISOString().replace(/[:.]/g, '-')}.png`;
    const saved = await files.write(path, png);
    if (!saved.ok) return toolFailure(`The screenshot could not be saved: ${saved.message}`, { action: 'screenshot' });
    // PNG: width and height are the first two fields of the IHDR chunk.
    const width = png.readUInt32BE(16);
    const height = png.readUInt32BE(20);
    return toolOutput(`Screenshot of ${page.url()} saved as ${saved.path} (${png.length} bytes, ${width}x${height} PNG).`, {
      path: saved.path,
      size_bytes: png.length,
      width,
      height,
    });
  }

  private async tabs(session: BrowserSession, close: number | undefined): Promise<GatewayToolResult> {
    if (close !== undefined && !(await session.closeTab(close))) return toolFailure(`There is no tab ${close}.`, { action: 'tabs' });
    const current = await session.page();
    const list = await Promise.all(session.pages().map(async (p, i) => `${i + 1}. ${(await p.title().catch(() => '')) || '(untitled)'} — ${p.url()}${p === current ? ' (current)' : ''}`));
    return toolOutput(`${close !== undefined ? `Closed tab ${close}.\n` : ''}Open tabs:\n${list.join('\n')}`, { tabs: list.length });
  }
}

class ArgumentMissing extends Error {}

/** Playwright's messages carry a call log after the first line; the model needs the first. */
function playwrightMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0].replace(/^\w+\.\w+: /, '');
}
