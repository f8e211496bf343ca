import { DomainRules, EgressGuard, NO_DOMAIN_RULES } from '@app/egress';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BlockedRequest, routeThroughGuard } from './guarded-routing';
import type { WebSocketBridge } from './websocket-bridge';

export interface BrowserSessionLimits {
  maxPages: number;
  maxHeapBytes: number;
}

/** Blocked requests remembered between two calls (the next result shows them). */
const BLOCKED_KEPT = 50;

/**
 * One session's browser context: its own cookies, storage and cache, shared by no other
 * session. Downloads are refused and service workers blocked, so nothing a page saves
 * outlives the context or reaches another one.
 */
export class BrowserSession {
  lastUsed = Date.now();
  /** Calls using the context now: it is never idle while one is (a slow page load can outlast the idle time). */
  callsInFlight = 0;
  private rules: DomainRules = NO_DOMAIN_RULES;
  private blocked: BlockedRequest[] = [];
  private notes: string[] = [];
  private active: Page | null = null;
  private sockets: WebSocketBridge | null = null;

  private constructor(
    readonly key: string,
    readonly context: BrowserContext,
    private readonly limits: BrowserSessionLimits,
  ) {}

  static async open(browser: Browser, key: string, guard: EgressGuard, limits: BrowserSessionLimits): Promise<BrowserSession> {
    const context = await browser.newContext({ acceptDownloads: false, serviceWorkers: 'block', viewport: { width: 1280, height: 800 } });
    const session = new BrowserSession(key, context, limits);
    session.sockets = await routeThroughGuard(context, guard, () => session.rules, (b) => session.recordBlocked(b));
    context.on('page', (page) => session.adopt(page));
    return session;
  }

  /** The tenant's egress rules as of this call (read once per call, applied to every request). */
  useRules(rules: DomainRules): void {
    this.rules = rules;
    this.lastUsed = Date.now();
  }

  /** A call taken from the pool is over: the idle time counts from now. */
  endCall(): void {
    this.callsInFlight = Math.max(0, this.callsInFlight - 1);
    this.lastUsed = Date.now();
  }

  /** The tab actions apply to: the newest open one, made on first use. */
  async page(): Promise<Page> {
    if (this.active && !this.active.isClosed()) return this.active;
    const open = this.context.pages().filter((p) => !p.isClosed());
    this.active = open[open.length - 1] ?? (await this.context.newPage());
    return this.active;
  }

  pages(): Page[] {
    return this.context.pages().filter((p) => !p.isClosed());
  }

  async closeTab(index: number): Promise<boolean> {
    const page = this.pages()[index - 1];
    if (!page) return false;
    await page.close();
    if (page === this.active) this.active = null;
    return true;
  }

  /** Requests refused since the last call, and notes (a tab over the limit was closed ...). */
  takeReport(): { blocked: BlockedRequest[]; notes: string[] } {
    const report = { blocked: this.blocked, notes: this.notes };
    this.blocked = [];
    this.notes = [];
    return report;
  }

  /** The JavaScript heap of every open page together, in bytes. */
  async heapBytes(): Promise<number> {
    let total = 0;
    for (const page of this.pages()) {
      const cdp = await this.context.newCDPSession(page);
      try {
        const { usedSize } = (await cdp.send('Runtime.getHeapUsage')) as { usedSize: number };
        total += usedSize;
      } finally {
        await cdp.detach().catch(() => undefined);
      }
    }
    return total;
  }

  /** Null when within limits; otherwise why the context must be closed. */
  async overLimit(): Promise<string | null> {
    const heap = await this.heapBytes().catch(() => 0);
    if (heap > this.limits.maxHeapBytes) {
      return `its pages used ${Math.round(heap / 1048576)} MB of JavaScript heap, over the ${Math.round(this.limits.maxHeapBytes / 1048576)} MB limit`;
    }
    return null;
  }

  async close(): Promise<void> {
    this.sockets?.closeAll();
    await this.context.close().catch(() => undefined);
  }

  private adopt(page: Page): void {
    if (this.pages().length > this.limits.maxPages) {
      this.notes.push(`A new tab (${page.url() || 'popup'}) was closed: at most ${this.limits.maxPages} tabs are open per session.`);
      void page.close().catch(() => undefined);
      return;
    }
    this.active = page;
  }

  private recordBlocked(b: BlockedRequest): void {
    if (this.blocked.length < BLOCKED_KEPT) this.blocked.push(b);
  }
}
