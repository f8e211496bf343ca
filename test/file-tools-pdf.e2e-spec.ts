import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * read_file of PDFs people actually have: made here by LibreOffice (subset TrueType fonts
 * mapped through ToUnicode CMaps) and Ghostscript (a rasterised, scanned-looking page with
 * no text layer), read back through the API and the sandbox's poppler. scripts/infra.sh
 * test-tools installs both programs.
 */
describe('read_file of PDFs', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;
  let dir: string;

  const GREETING = 'Grüße aus Zürich: naïve café, Ελληνικά, Кириллица, ½ € ø';
  const SECOND_PAGE = 'Zweite Seite — Ångström, Œuvre, Ђурђевдан';

  const tool = (name: string, args: Record<string, unknown>) =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });

  const ok = async (name: string, args: Record<string, unknown>) => {
    const res = await tool(name, args);
    if (res.status !== 200 || res.body.is_error) throw new Error(`${name} failed: ${res.status} ${res.text.slice(0, 500)}`);
    return res.body;
  };

  /** LibreOffice's PDF of a plain-text file. */
  const libreOfficePdf = (name: string, text: string): string => {
    writeFileSync(join(dir, `${name}.txt`), text);
    execFileSync('soffice', ['--headless', '--norestore', '--convert-to', 'pdf', '--outdir', dir, join(dir, `${name}.txt`)], {
      env: { ...process.env, HOME: dir },
      timeout: 120_000,
      stdio: 'ignore',
    });
    return join(dir, `${name}.pdf`);
  };

  const ghostscript = (...args: string[]) => execFileSync('gs', ['-q', '-dNOPAUSE', '-dBATCH', '-dSAFER', ...args], { timeout: 60_000, stdio: 'ignore' });

  /** Copies a host file into the workspace (base64 through the terminal, in pieces a command can hold). */
  const upload = async (hostPath: string, workspacePath: string) => {
    const b64 = readFileSync(hostPath).toString('base64');
    await ok('terminal', { command: `rm -f ${workspacePath}.b64` });
    for (let i = 0; i < b64.length; i += 60_000) {
      await ok('terminal', { command: `printf '%s' '${b64.slice(i, i + 60_000)}' >> ${workspacePath}.b64` });
    }
    const done = await ok('terminal', { command: `base64 -d ${workspacePath}.b64 > ${workspacePath} && rm ${workspacePath}.b64` });
    expect(done.output).toMatch(/^exit_code: 0$/m);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runbox-pdf-'));
    const letter = libreOfficePdf('letter', `${GREETING}\nZeile zwei: Straße, Ölfeld\n`);
    const second = libreOfficePdf('second', `${SECOND_PAGE}\n`);
    const scanned = join(dir, 'scanned.pdf');
    // pdfimage24 renders every page to pixels: the text becomes an image, like a scan.
    ghostscript('-sDEVICE=pdfimage24', '-r100', '-o', scanned, letter);
    const book = join(dir, 'book.pdf');
    ghostscript('-sDEVICE=pdfwrite', '-o', book, letter, second, scanned);

    stack = new TestStack();
    await stack.start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    await ok('terminal', { command: 'mkdir -p pdf' });
    await upload(letter, 'pdf/letter.pdf');
    await upload(scanned, 'pdf/scanned.pdf');
    await upload(book, 'pdf/book.pdf');
  }, 300_000);

  afterAll(async () => {
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('extracts non-ASCII text from a LibreOffice PDF (subset fonts, ToUnicode maps)', async () => {
    const body = await ok('read_file', { path: 'pdf/letter.pdf' });
    expect(body.output).toBe(`pdf/letter.pdf — PDF, pages 1 of 1\n\n--- page 1 ---\n${GREETING}\nZeile zwei: Straße, Ölfeld`);
    expect(body.metadata).toMatchObject({ kind: 'pdf', total_pages: 1, pages: [1], pages_without_text: [] });
  });

  it('says a scanned page has no text layer instead of inventing text', async () => {
    const body = await ok('read_file', { path: 'pdf/scanned.pdf' });
    expect(body.output).toBe(
      'pdf/scanned.pdf — PDF, pages 1 of 1\n\n--- page 1 ---\n' +
        '(no text layer on this page: it is probably a scanned image; its text cannot be extracted)',
    );
    expect(body.metadata).toMatchObject({ total_pages: 1, pages_without_text: [1] });
  });

  it('reads by page range across a merged document', async () => {
    const body = await ok('read_file', { path: 'pdf/book.pdf', pages: '2-3' });
    expect(body.output.split('\n')[0]).toBe('pdf/book.pdf — PDF, pages 2-3 of 3');
    expect(body.output).toContain(`--- page 2 ---\n${SECOND_PAGE}\n\n--- page 3 ---\n(no text layer on this page`);
    expect(body.output).not.toContain('Grüße');
    expect(body.metadata).toMatchObject({ total_pages: 3, pages: [2, 3], pages_without_text: [3] });
    const first = await ok('read_file', { path: 'pdf/book.pdf', pages: '1' });
    expect(first.output).toContain(`--- page 1 ---\n${GREETING}`);
    const past = await tool('read_file', { path: 'pdf/book.pdf', pages: '4-9' });
    expect(past.body.is_error).toBe(true);
    expect(past.body.output).toContain('past the end of the document, which has 3 pages');
  });
});
