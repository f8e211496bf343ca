import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { chromium, type Browser } from 'playwright-core';
import { Outbound } from '../outbound';
import { BrowserSession } from './browser-session';
import { findChromium } from './chromium-path';

/**
 * Chromium flags. Name resolution is switched off and every connection is sent to a proxy
 * that does not exist, loopback included: the only way out for a page is the request
 * routing, which goes through the egress guard. Should a request ever escape the routing
 * (a worker, a protocol Playwright does not intercept), it fails here instead.
 */
const CHROMIUM_ARGS = [
  '--headless=new',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--host-resolver-rules=MAP * ~NOTFOUND',
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=<-loopback>',
];

const SWEEP_MS = 30_000;

export type BrowserAvailability = { available: true } | { available: false; reason: string };

/**
 * One headless Chromium per gateway process, launched on first use, with one browser
 * context per session (by tenant and session id). Contexts close when their session has
 * not used the browser for RUNBOX_BROWSER_IDLE_SECONDS, or goes over its limits. A crashed
 * Chromium is relaunched on the next call, which is told that its tabs and cookies are gone.
 */
@Injectable()
export class BrowserPool implements OnModuleDestroy {
  private browser: Promise<Browser> | null = null;
  private readonly sessions = new Map<string, Promise<BrowserSession>>();
  /** Sessions whose context a crash took away: their next call says so. */
  private readonly lostInCrash = new Set<string>();
  private readonly executable: string | null;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly outbound: Outbound,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.executable = findChromium(config.RUNBOX_BROWSER_EXECUTABLE);
    // Often enough that a context outlives its idle time by at most half of it.
    this.sweeper = setInterval(() => void this.closeIdle(), Math.min(SWEEP_MS, (config.RUNBOX_BROWSER_IDLE_SECONDS * 1000) / 2));
    this.sweeper.unref();
  }

  availability(): BrowserAvailability {
    return this.executable ? { available: true } : { available: false, reason: 'no Chromium found (install chromium or set RUNBOX_BROWSER_EXECUTABLE)' };
  }

  /**
   * The session's context, made on first use; `restarted` when a crash ended the one it had.
   * The caller holds it until `session.endCall()`: until then it is not idle.
   */
  async session(tenantId: string, sessionId: string): Promise<{ session: BrowserSession; restarted: boolean }> {
    const key = `${tenantId}/${sessionId}`;
    await this.dropIfDead();
    const restarted = this.lostInCrash.delete(key);
    let pending = this.sessions.get(key);
    if (!pending) {
      pending = this.launch().then((browser) =>
        BrowserSession.open(browser, key, this.outbound.guard, {
          maxPages: this.config.RUNBOX_BROWSER_MAX_PAGES,
          maxHeapBytes: this.config.RUNBOX_BROWSER_MAX_HEAP_MB * 1024 * 1024,
        }),
      );
      this.sessions.set(key, pending);
      pending.catch(() => this.sessions.delete(key));
    }
    const session = await pending;
    session.callsInFlight++;
    session.lastUsed = Date.now();
    return { session, restarted };
  }

  /** Closes a session's context (the session ended, or went over a limit). */
  async release(tenantId: string, sessionId: string): Promise<void> {
    const key = `${tenantId}/${sessionId}`;
    const pending = this.sessions.get(key);
    this.sessions.delete(key);
    if (pending) await (await pending.catch(() => null))?.close();
  }

  /** Contexts open now (for tests and metrics). */
  openSessions(): number {
    return this.sessions.size;
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.sweeper);
    const browser = this.browser;
    this.browser = null;
    this.sessions.clear();
    if (browser) await (await browser.catch(() => null))?.close().catch(() => undefined);
  }

  private launch(): Promise<Browser> {
    if (!this.executable) return Promise.reject(new Error('no Chromium found'));
    if (!this.browser) {
      const starting = chromium.launch({ executablePath: this.executable, headless: true, args: CHROMIUM_ARGS, chromiumSandbox: false });
      this.browser = starting;
      starting.then(
        (browser) => browser.on('disconnected', () => this.forget(starting)),
        () => {
          if (this.browser === starting) this.browser = null;
        },
      );
    }
    return this.browser;
  }

  /**
   * A round trip to Chromium before each call: the 'disconnected' event may not have arrived
   * yet when the process has already died, and a call must not land on a dead context.
   */
  private async dropIfDead(): Promise<void> {
    const current = this.browser;
    const browser = current && (await current.catch(() => null));
    if (!current || !browser) return;
    const alive = await browser
      .newBrowserCDPSession()
      .then(async (cdp) => {
        await cdp.send('Browser.getVersion');
        await cdp.detach().catch(() => undefined);
        return true;
      })
      .catch(() => false);
    if (!alive) this.forget(current);
  }

  /** The browser is gone: its sessions' next calls start fresh, told what was lost. */
  private forget(which: Promise<Browser>): void {
    if (this.browser !== which) return;
    this.logger.warn({ contexts: this.sessions.size }, 'Chromium exited; it is relaunched on the next browser call');
    this.browser = null;
    for (const [key, pending] of this.sessions) {
      this.lostInCrash.add(key);
      // The contexts went with the browser; what the gateway holds for them (WebSockets) goes too.
      void pending.then((session) => session.close(), () => undefined);
    }
    this.sessions.clear();
  }

  private async closeIdle(): Promise<void> {
    const cutoff = Date.now() - this.config.RUNBOX_BROWSER_IDLE_SECONDS * 1000;
    for (const [key, pending] of [...this.sessions]) {
      const session = await pending.catch(() => null);
      if (session && session.callsInFlight === 0 && session.lastUsed < cutoff && this.sessions.get(key) === pending) {
        this.sessions.delete(key);
        await session.close();
      }
    }
  }
}
