/**
 * Web tools benchmark: `npm run bench:web`. Prints figures; asserts nothing.
 *
 *  1. web_fetch of a local 100 KB article page through POST /v1/sessions/{id}/tools/web_fetch
 *     (HTTP → gateway → egress guard → the page server → Readability → Turndown), next to a
 *     plain `fetch()` of the same page from this process.
 *  2. The browser tool's engine (BrowserPool, as the gateway runs it): cold start (Chromium
 *     launch, a context with guarded routing, the first page), then warm actions (snapshot,
 *     navigate) next to the same navigate by plain Playwright on a Chromium of its own
 *     without routing; and the memory (proportional set size) each extra context with one
 *     loaded page adds to Chromium.
 *
 * It starts its own stack (database, NATS, gateway and executor processes) and a page server
 * on loopback, and removes all of it at the end.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@app/config';
import { NO_DOMAIN_RULES } from '@app/egress';
import pino from 'pino';
import { chromium } from 'playwright-core';
import { articlePage } from '../test/support/web-fixture-server';
import { BrowserPool } from '../apps/gateway/src/web/browser/browser-pool';
import { findChromium } from '../apps/gateway/src/web/browser/chromium-path';
import { EgressRulesRepository } from '../apps/gateway/src/web/egress-rules.repository';
import { Outbound } from '../apps/gateway/src/web/outbound';
import { BenchStack } from './support/bench-stack';
import { percentile, timeIt } from './support/stats';

const ITERATIONS = { warmup: 10, fetch: 200, browserActions: 60, contexts: 8 };

function report(label: string, samples: number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  const p50 = percentile(s, 50);
  console.log(`  ${label.padEnd(58)} p50 ${p50.toFixed(1).padStart(7)} ms   p99 ${percentile(s, 99).toFixed(1).padStart(7)} ms   (n=${s.length})`);
  return p50;
}

/** A page of about 100 KB: some 25 KB of article inside navigation, scripts and styles. */
function hundredKbPage(): string {
  const noise = `<script>${'var x = 1;'.repeat(4_600)}</script><style>${'.c{color:red}'.repeat(2_500)}</style>`;
  return articlePage('Benchmark article', 90).replace('</body>', `${noise}</body>`);
}

/** Proportional set size (kB) of every process below this one: Chromium and its helpers. */
function descendantsPssKb(): number {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const isDescendant = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === process.pid) return true;
    return false;
  };
  let total = 0;
  for (const pid of parent.keys()) {
    if (!isDescendant(pid)) continue;
    try {
      total += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone
    }
  }
  return total;
}

async function main(): Promise<void> {
  const page = hundredKbPage();
  const server: Server = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(req.url === '/other' ? articlePage('Other', 5) : page));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const allow = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const image = process.env.RUNBOX_SANDBOX_IMAGE ?? execFileSync(join(__dirname, '..', 'deploy/sandbox/build.sh'), { encoding: 'utf8' }).trim();
  const stack = new BenchStack({ RUNBOX_ALLOW_PRIVATE_HOSTS: allow, RUNBOX_SANDBOX_IMAGE: image });
  try {
    await stack.start();
    const tenant = await stack.createTenant('bench-web');
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
    console.log(`runbox web tools benchmark (${new Date().toISOString()}; ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})`);
    console.log(`\nweb_fetch of a local ${(Buffer.byteLength(page) / 1024).toFixed(0)} KB page`);
    const webFetch = () =>
      stack.request('POST', `/v1/sessions/${session}/tools/web_fetch`, { key: tenant.apiKey, body: { arguments: { url: `${origin}/article` } } }).then((r) => {
        if (r.status !== 200 || r.body.is_error) throw new Error(`web_fetch failed: ${r.text.slice(0, 300)}`);
      });
    const plain = () => fetch(`${origin}/article`).then((r) => r.text());
    await timeIt(ITERATIONS.warmup, webFetch);
    await timeIt(ITERATIONS.warmup, plain);
    const tool = report('web_fetch through the API (guard + Readability + Turndown)', await timeIt(ITERATIONS.fetch, webFetch));
    const raw = report('plain fetch() of the same page', await timeIt(ITERATIONS.fetch, plain));
    console.log(`  ratio web_fetch / plain fetch: ${(tool / raw).toFixed(1)}x`);
  } finally {
    await stack.stop();
  }

  try {
    await browserBench(origin, allow);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

async function browserBench(origin: string, allow: string): Promise<void> {
  const config = loadConfig({ RUNBOX_ALLOW_PRIVATE_HOSTS: allow, RUNBOX_BROWSER_MAX_HEAP_MB: '4096', RUNBOX_BROWSER_MAX_PAGES: '50' });
  const rules = { forTenant: async () => NO_DOMAIN_RULES } as unknown as EgressRulesRepository;
  const pool = new BrowserPool(config, new Outbound(config, rules), pino({ level: 'silent' }));
  console.log('\nbrowser (one Chromium, one context per session, every request through the egress guard)');
  try {
    const t0 = process.hrtime.bigint();
    const { session } = await pool.session('bench', 'cold');
    const first = await session.page();
    await first.goto(`${origin}/article`, { waitUntil: 'domcontentloaded' });
    console.log(`  cold start (launch, context, first page loaded): ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(0)} ms`);

    const snapshot = () => first.ariaSnapshot({ mode: 'ai' });
    const navigate = (p: typeof first) => () => p.goto(`${origin}/other`, { waitUntil: 'domcontentloaded' });
    await timeIt(ITERATIONS.warmup, navigate(first));
    report('warm snapshot (accessibility tree with refs)', await timeIt(ITERATIONS.browserActions, snapshot));
    const guarded = report('warm navigate, guarded routing', await timeIt(ITERATIONS.browserActions, navigate(first)));

    const plainBrowser = await chromium.launch({ executablePath: findChromium(config.RUNBOX_BROWSER_EXECUTABLE) ?? undefined, args: ['--headless=new', '--disable-gpu'] });
    try {
      const plainPage = await (await plainBrowser.newContext()).newPage();
      await timeIt(ITERATIONS.warmup, navigate(plainPage));
      const plain = report('warm navigate, plain Playwright (no routing)', await timeIt(ITERATIONS.browserActions, navigate(plainPage)));
      console.log(`  ratio guarded / plain navigate: ${(guarded / plain).toFixed(1)}x`);
    } finally {
      await plainBrowser.close();
    }

    const before = descendantsPssKb();
    for (let i = 0; i < ITERATIONS.contexts; i++) {
      const { session: s } = await pool.session('bench', `ctx-${i}`);
      await (await s.page()).goto(`${origin}/article`, { waitUntil: 'load' });
    }
    const after = descendantsPssKb();
    console.log(`  memory per context with one loaded 100 KB page: ${((after - before) / ITERATIONS.contexts / 1024).toFixed(1)} MB (Chromium PSS ${(before / 1024).toFixed(0)} → ${(after / 1024).toFixed(0)} MB over ${ITERATIONS.contexts} contexts)`);
  } finally {
    await pool.onModuleDestroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
