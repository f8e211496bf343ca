import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

/** A paragraph long enough for Readability to count it as article text. */
export const ARTICLE_SENTENCE = 'The lighthouse keeper logged every passing ship in a leather-bound journal, noting the weather and the colour of the sea.';

const NAV = '<nav><ul><li><a href="/home">Home navigation link</a></li><li><a href="/shop">Shop navigation link</a></li></ul></nav>';
const FOOTER = '<footer>Footer boilerplate: cookie policy, imprint, newsletter signup</footer>';

export function articlePage(title: string, paragraphs: number): string {
  const body = Array.from({ length: paragraphs }, (_, i) => `<p>${i + 1}. ${ARTICLE_SENTENCE} ${ARTICLE_SENTENCE}</p>`).join('\n');
  return `<!doctype html><html><head><title>${title}</title><style>.x{color:red}</style></head><body>${NAV}<aside>Sidebar: trending stories</aside><main><article><h1>${title}</h1>${body}</article></main>${FOOTER}<script>var tracking = "analytics";</script></body></html>`;
}

const FORM_PAGE = `<!doctype html><html><head><title>Sign up</title></head><body>
<h1>Sign up</h1>
<form id="f">
  <label for="name">Name</label><input id="name" name="name">
  <label for="plan">Plan</label><select id="plan" name="plan"><option value="free">Free</option><option value="pro">Pro</option></select>
  <button type="submit">Send</button>
</form>
<p id="out"></p>
<script>
document.getElementById('f').addEventListener('submit', async (e) => {
  e.preventDefault();
  const res = await fetch('/submit', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: document.getElementById('name').value, plan: document.getElementById('plan').value }) });
  document.getElementById('out').textContent = await res.text();
});
</script></body></html>`;

const PROBE_PAGE = `<!doctype html><html><head><title>Probe</title></head><body><p id="s">probing</p>
<script>
fetch('http://127.0.0.1:5432/').then(() => { document.getElementById('s').textContent = 'reached the database'; },
  () => { document.getElementById('s').textContent = 'probe failed'; });
</script></body></html>`;

/** A page whose script opens a WebSocket to `to`, says hello and shows the answer or the close code. */
function socketPage(to: string): string {
  return `<!doctype html><html><head><title>Socket</title></head><body><p id="s">connecting</p>
<script>
const out = document.getElementById('s');
const ws = new WebSocket(${JSON.stringify(to).replace(/</g, '\\u003c')});
ws.onopen = () => ws.send('hello');
ws.onmessage = (e) => { out.textContent = 'ws said: ' + e.data; };
ws.onclose = (e) => { if (!out.textContent.startsWith('ws said')) out.textContent = 'ws closed ' + e.code; };
</script></body></html>`;
}

/**
 * Opens three popups at once and shows how many are closed; each popup shows the same
 * (read from its opener), so the text is on whichever tab the browser tool acts on.
 */
const POPUPS_PAGE = `<!doctype html><html><head><title>Popups</title></head><body><p id="s">opening</p>
<script>
const wins = [1, 2, 3].map((n) => window.open('/popup-child?n=' + n));
window.popupStatus = () => wins.filter((w) => w && w.closed).length + ' of 3 popups closed, ' + wins.filter((w) => !w).length + ' blocked';
setInterval(() => { document.getElementById('s').textContent = window.popupStatus(); }, 20);
</script></body></html>`;

const POPUP_CHILD_PAGE = `<!doctype html><html><head><title>Child</title></head><body><p id="s">child</p>
<script>setInterval(() => { try { document.getElementById('s').textContent = opener.popupStatus(); } catch (e) {} }, 20);</script></body></html>`;

/** Keeps about 96 MB of JavaScript heap (12 million doubles) reachable from the page. */
const HOG_PAGE = `<!doctype html><html><head><title>Hog</title></head><body>
<script>window.hog = new Array(12e6).fill(0.5);</script><p>allocated</p></body></html>`;

/** A one-page PDF whose text is `text` (ASCII), with a correct cross-reference table. */
export function tinyPdf(text: string): Buffer {
  const stream = `BT /F1 18 Tf 72 720 Td (${text.replace(/[()\\]/g, '')}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let pdf = '%PDF-1.4\n';
  const offsets = objects.map((body, i) => {
    const at = pdf.length;
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
    return at;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'latin1');
}

export const PDF_SENTENCE = 'Lighthouse logbook kept as a portable document';

/**
 * The web the tests browse: one HTTP server on loopback with an article, redirects (some to
 * addresses the guard must refuse), failures, a slow answer, a 3 MB page, a SearXNG search
 * endpoint, a form driven by JavaScript and cookie pages. It records every request.
 */
export class WebFixtureServer {
  readonly requests: Array<{ path: string; cookie?: string; body?: string; userAgent?: string }> = [];
  /** WebSocket connections the echo endpoint (/ws) accepted, with what their handshake carried. */
  readonly sockets: Array<{ path: string; host?: string; cookie?: string; origin?: string }> = [];
  private server?: Server;
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  private readonly hanging = new Set<ServerResponse>();
  port = 0;

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on('upgrade', (req, socket, head) => {
      if (!req.url?.startsWith('/ws')) return socket.destroy();
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        this.sockets.push({ path: req.url ?? '', host: req.headers.host, cookie: req.headers.cookie, origin: req.headers.origin });
        ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `echo: ${String(data)}`));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
    const url = new URL(req.url ?? '/', this.origin);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    this.requests.push({ path: url.pathname + url.search, cookie: req.headers.cookie, body: Buffer.concat(chunks).toString(), userAgent: req.headers['user-agent'] });
    const html = (body: string, status = 200, headers: Record<string, string | string[]> = {}) =>
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(body);
    const redirect = (to: string) => res.writeHead(302, { location: to }).end();
    switch (url.pathname) {
      case '/article':
        return html(articlePage('Keeping the light', Number(url.searchParams.get('paragraphs') ?? 6)));
      case '/loop':
        return redirect('/loop');
      case '/doc.pdf':
        return res.writeHead(200, { 'content-type': 'application/pdf' }).end(tinyPdf(PDF_SENTENCE));
      case '/socket':
        return html(socketPage(url.searchParams.get('to') ?? ''));
      case '/popups':
        return html(POPUPS_PAGE);
      case '/popup-child':
        return html(POPUP_CHILD_PAGE);
      case '/hog':
        return html(HOG_PAGE);
      case '/r1':
        return redirect('/r2');
      case '/r2':
        return redirect(`${this.origin}/r3`);
      case '/r3':
        return redirect('/article');
      case '/to':
        return redirect(url.searchParams.get('target') ?? '/');
      case '/fail':
        return res.writeHead(500, { 'content-type': 'text/plain' }).end(`database exploded: ${'x'.repeat(5000)}`);
      case '/late': {
        // Answers after ?ms= (at most 10 s): a page load that takes its time.
        const ms = Math.min(Number(url.searchParams.get('ms') ?? 0) || 0, 10_000);
        setTimeout(() => html(articlePage('Worth the wait', 2)), ms);
        return;
      }
      case '/slow':
        this.hanging.add(res);
        return; // never answers
      case '/big':
        return html(articlePage('A very long page', 12_000));
      case '/data.json':
        return res.writeHead(200, { 'content-type': 'application/json' }).end('{"answer":42,"items":[1,2]}');
      case '/searx/search':
        return res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            query: url.searchParams.get('q'),
            results: [
              { title: 'First hit', url: 'https://one.example/a', content: `About ${url.searchParams.get('q')}` },
              { title: 'Second hit', url: 'https://two.example/b', content: 'More' },
              { title: 'Not a web link', url: 'javascript:alert(1)', content: 'dropped' },
            ],
          }),
        );
      case '/form':
        return html(FORM_PAGE);
      case '/submit': {
        const { name, plan } = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { name?: string; plan?: string };
        return res.writeHead(200, { 'content-type': 'text/plain' }).end(`Thanks, ${name} (${plan})`);
      }
      case '/probe':
        return html(PROBE_PAGE);
      case '/cookie/set':
        return html(`<title>set</title><p>cookie set</p>`, 200, { 'set-cookie': `who=${url.searchParams.get('v')}; Path=/` });
      case '/cookie/show':
        return html(`<title>show</title><p>cookie: [${req.headers.cookie ?? 'none'}]</p>`);
      default:
        return html('<title>nothing</title><p>not found</p>', 404);
    }
  }
}
