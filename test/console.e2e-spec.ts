import { Browser, BrowserContext, Page } from 'playwright-core';
import { ScriptedModelServer } from '@app/testing';
import { launchChromium, screenshot, seriousViolations } from './support/console-browser';
import { TenantCredentials, TestStack } from './support/test-stack';

/** Bounded waits for what the page shows (the run loop, a sandbox start). */
const SHOWN_MS = 60_000;

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * The web console in a real headless Chromium against the real gateway and executor, the
 * model scripted: what an operator does with it, screen by screen, each screen saved as a
 * screenshot (test-artifacts/console/) and checked with axe-core.
 */
describe('console', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let a: TenantCredentials;
  let b: TenantCredentials;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  /** Every URL the page asked for: the key must never be in one. */
  const requested: string[] = [];
  const releaseLive = deferred();
  const releaseSlow = deferred();
  let firstRun = '';
  let firstSession = '';

  const call = (name: string) => page.locator(`[data-testid="call-${name}"]`);
  const badgeOf = (locator: ReturnType<Page['locator']>) => locator.locator('.call-head .badge');
  const waitText = (selector: string, text: string | RegExp) => page.locator(selector, { hasText: text }).first().waitFor({ timeout: SHOWN_MS });

  /** Screenshot and accessibility check of the screen as it is now. */
  const checkScreen = async (name: string) => {
    await screenshot(page, name);
    expect({ screen: name, violations: await seriousViolations(page) }).toEqual({ screen: name, violations: [] });
  };

  /**
   * Waits until the tool's switch shows `on` and is usable again (the PATCH answered, the
   * tenant read again). Polled from here with evaluate, which the page's policy does not
   * govern; waitForFunction's string form would need eval in the page, which it forbids.
   */
  const switchShows = async (tool: string, on: boolean) => {
    const expression = `(() => {
      const label = [...document.querySelectorAll('label.switch')].find((l) => l.textContent === ${JSON.stringify(tool)});
      const input = label && label.querySelector('input');
      return !!input && input.checked === ${on} && !input.disabled;
    })()`;
    for (const deadline = Date.now() + SHOWN_MS; !(await page.evaluate(expression)); ) {
      if (Date.now() > deadline) throw new Error(`the ${tool} switch never showed ${on ? 'on' : 'off'}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const signIn = async (apiKey: string, adminToken?: string) => {
    await page.goto(`${stack.url}/console`);
    await page.getByLabel('API key').fill(apiKey);
    if (adminToken) await page.getByLabel(/Admin token/).fill(adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Console' }).waitFor({ timeout: SHOWN_MS });
  };

  const startRunByApi = async (input: string, body: Record<string, unknown> = {}) => {
    const res = await stack.request('POST', '/v1/runs', { key: a.apiKey, body: { input, toolset: 'coding', ...body } });
    expect(res.status).toBe(202);
    return res.body as { id: string; session_id: string };
  };

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    a = await stack.createTenant('console-first');
    b = await stack.createTenant('console-second');
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('request', (r) => requested.push(r.url()));
  });

  afterAll(async () => {
    releaseLive.resolve();
    releaseSlow.resolve();
    await context?.close();
    await browser?.close();
    await stack?.stop();
    await model.stop();
  });

  it('signs in with an API key and the admin token, keeping both out of every URL', async () => {
    await page.goto(`${stack.url}/console`);
    await page.getByLabel('API key').waitFor();
    await checkScreen('01-sign-in');
    await page.getByLabel('API key').fill('rbx_not_a_real_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await waitText('[role="alert"]', 'The API key was not accepted.');

    await signIn(a.apiKey, stack.adminToken);
    expect(await page.evaluate("sessionStorage.getItem('runbox.apiKey')")).toBe(a.apiKey);
    await waitText('main', 'No runs yet.');
    await checkScreen('02-runs-empty');
  });

  it('refuses inline script: the page’s policy blocks it', async () => {
    // The bound is only for a failing policy: the violation event comes well before it.
    const outcome = await page.evaluate(`new Promise((resolve) => {
      document.addEventListener('securitypolicyviolation', (e) => resolve('blocked ' + e.violatedDirective), { once: true });
      const script = document.createElement('script');
      script.textContent = 'window.inlineRan = true';
      document.body.appendChild(script);
      setTimeout(() => resolve(window.inlineRan ? 'ran' : 'no event'), 5000);
    })`);
    expect(outcome).toMatch(/^blocked script-src/);
  });

  it('starts a run and shows its tool call, with arguments and result, while the run is still going', async () => {
    const input = 'Write the notes file';
    model.route(
      ScriptedModelServer.sentBy(input),
      { toolCalls: [{ name: 'write_file', arguments: { path: 'notes/hello.txt', content: 'first line\nsecond line' } }] },
      async () => {
        await releaseLive.promise;
        return { content: 'Wrote notes/hello.txt.' };
      },
    );
    await page.getByRole('link', { name: 'Start a run' }).first().click();
    await page.getByLabel('Input').fill(input);
    await page.getByLabel('Toolset').selectOption('coding');
    await page.getByLabel('Approval mode').selectOption('auto');
    await checkScreen('03-start-run');
    await page.getByRole('button', { name: 'Start' }).click();

    await badgeOf(call('write_file')).filter({ hasText: 'completed' }).waitFor({ timeout: SHOWN_MS });
    // The model's next answer is held, so the run cannot have ended: the call was drawn
    // from the live stream, not from a reload of a finished run.
    firstRun = decodeURIComponent(page.url().split('#/runs/')[1]);
    expect(firstRun).toMatch(/^run_/);
    expect((await stack.request('GET', `/v1/runs/${firstRun}`, { key: a.apiKey })).body.status).toBe('running');
    expect(await page.locator('.event.end').count()).toBe(0);
    await waitText('[data-testid="run-status"]', 'running');
    expect(await call('write_file').innerText()).toContain('notes/hello.txt');
    await checkScreen('04-run-live');

    releaseLive.resolve();
    await waitText('.event.end', 'Run completed');
    await waitText('[data-testid="run-status"]', 'completed');
    await waitText('.event.end', 'Wrote notes/hello.txt.');
    firstSession = (await stack.request('GET', `/v1/runs/${firstRun}`, { key: a.apiKey })).body.session_id;
    await checkScreen('05-run-completed');
  });

  it('lists runs live: a run started elsewhere appears without a reload', async () => {
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await page.locator('[data-testid="runs-table"]').waitFor({ timeout: SHOWN_MS });
    const input = 'Say hello';
    model.route(ScriptedModelServer.sentBy(input), { content: 'Hello.' });
    const run = await startRunByApi(input);
    await page.getByRole('link', { name: run.id }).waitFor({ timeout: SHOWN_MS });
    await stack.waitForRun(a.apiKey, run.id);
    await page.locator('tr', { hasText: run.id }).locator('.badge', { hasText: 'completed' }).waitFor({ timeout: SHOWN_MS });
    await checkScreen('06-runs-list');
  });

  it('approves a waiting call and the run completes', async () => {
    const input = 'Write approved.txt';
    model.route(
      ScriptedModelServer.sentBy(input),
      { toolCalls: [{ name: 'write_file', arguments: { path: 'approved.txt', content: 'yes' } }] },
      { content: 'Approved and written.' },
    );
    const run = await startRunByApi(input, { approval_mode: 'prompt' });
    await page.goto(`${stack.url}/console#/runs/${run.id}`);
    const approve = page.getByRole('button', { name: 'Approve' });
    await approve.waitFor({ timeout: SHOWN_MS });
    expect(await call('write_file').innerText()).toContain('approved.txt');
    await checkScreen('07-approval-waiting');
    await approve.click();
    await waitText('.event.end', 'Run completed');
    await badgeOf(call('write_file')).filter({ hasText: 'completed' }).waitFor({ timeout: SHOWN_MS });
    const file = await stack.request('POST', `/v1/sessions/${run.session_id}/tools/read_file`, { key: a.apiKey, body: { arguments: { path: 'approved.txt' } } });
    expect(file.body.output).toContain('yes');
  });

  it('denies a waiting call with a reason: nothing is written and the run goes on', async () => {
    const input = 'Write denied.txt';
    model.route(
      ScriptedModelServer.sentBy(input),
      { toolCalls: [{ name: 'write_file', arguments: { path: 'denied.txt', content: 'no' } }] },
      { content: 'Understood, not written.' },
    );
    const run = await startRunByApi(input, { approval_mode: 'prompt' });
    await page.goto(`${stack.url}/console#/runs/${run.id}`);
    await page.getByRole('button', { name: 'Deny' }).waitFor({ timeout: SHOWN_MS });
    await page.getByLabel('Reason for denying (optional)').fill('not in this folder');
    await page.getByRole('button', { name: 'Deny' }).click();
    await badgeOf(call('write_file')).filter({ hasText: 'denied' }).waitFor({ timeout: SHOWN_MS });
    await waitText('[data-testid="call-write_file"]', 'not in this folder');
    await waitText('.event.end', 'Run completed');
    await checkScreen('08-run-denied');
    const file = await stack.request('POST', `/v1/sessions/${run.session_id}/tools/list_files`, { key: a.apiKey, body: { arguments: {} } });
    expect(file.body.output).not.toContain('denied.txt');
    // The model was told the call was refused, with the reason.
    const told = model.requests.filter((r) => ScriptedModelServer.firstUserMessage(r) === input).at(-1)!;
    expect(JSON.stringify(told.body.messages.filter((m) => m.role === 'tool'))).toContain('not in this folder');
  });

  it('cancels a slow run', async () => {
    const input = 'Think for a long time';
    model.route(ScriptedModelServer.sentBy(input), async () => {
      await releaseSlow.promise;
      return { content: 'too late' };
    });
    const run = await startRunByApi(input);
    await page.goto(`${stack.url}/console#/runs/${run.id}`);
    await waitText('[data-testid="run-status"]', 'running');
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await waitText('.event.end', 'Run cancelled');
    await waitText('[data-testid="run-status"]', 'cancelled');
    expect((await stack.request('GET', `/v1/runs/${run.id}`, { key: a.apiKey })).body.status).toBe('cancelled');
    await checkScreen('09-run-cancelled');
  });

  it('opens the workspace of the first run’s session and reads the file it wrote, with line numbers', async () => {
    await page.getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('link', { name: firstSession }).waitFor({ timeout: SHOWN_MS });
    await checkScreen('10-sessions');
    await page.getByRole('link', { name: firstSession }).click();
    await page.getByRole('button', { name: 'Open the workspace' }).click();
    await page.getByRole('button', { name: /notes\// }).click();
    await page.getByRole('button', { name: 'hello.txt' }).click();
    const lines = page.locator('[data-testid="file-viewer"] ol.lines li');
    await lines.first().waitFor({ timeout: SHOWN_MS });
    expect(await lines.allInnerTexts()).toEqual(['first line', 'second line']);
    await waitText('.messages', 'Wrote notes/hello.txt.');
    await checkScreen('11-session-workspace');
  });

  it('shows the tools, memory, skills and admin screens', async () => {
    await stack.request('POST', '/v1/memory', { key: a.apiKey, body: { content: 'Deploys need a ticket id.' } });
    await page.getByRole('link', { name: 'Tools' }).click();
    await page.locator('[data-testid="tools-table"] tr', { hasText: 'write_file' }).waitFor({ timeout: SHOWN_MS });
    await page.getByLabel('Tenant', { exact: true }).selectOption(a.tenantId);
    const terminal = page.getByRole('switch', { name: 'terminal', exact: true });
    await terminal.waitFor({ timeout: SHOWN_MS });
    expect(await terminal.isChecked()).toBe(true);
    await terminal.click();
    // The switch shows the saved state once the PATCH is answered and the tenant read again.
    await switchShows('terminal', false);
    const saved = async () => (await stack.request('GET', `/v1/admin/tenants/${a.tenantId}`, { key: stack.adminToken })).body.run_defaults;
    expect(await saved()).toEqual({ disabled: ['terminal'] });
    await checkScreen('12-tools');
    await terminal.click();
    await switchShows('terminal', true);
    expect(await saved()).toBeNull();

    await page.getByRole('link', { name: 'Memory' }).click();
    await waitText('.cards', 'Deploys need a ticket id.');
    await checkScreen('13-memory');
    await page.getByRole('button', { name: /Delete the fact/ }).click();
    await waitText('main', 'No facts saved.');

    await page.getByRole('link', { name: 'Skills' }).click();
    await page.locator('.cards .card').first().waitFor({ timeout: SHOWN_MS });
    await checkScreen('14-skills');

    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByRole('button', { name: 'console-first' }).click();
    await page.getByRole('button', { name: 'Issue a key' }).waitFor({ timeout: SHOWN_MS });
    await checkScreen('15-admin');
  });

  it('works on a narrow screen', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.goto(`${stack.url}/console#/runs/${firstRun}`);
    await waitText('.event.end', 'Run completed');
    // Nothing is wider than the screen: no sideways scrolling of the whole page.
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await checkScreen('16-narrow-run');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('a second tenant’s key sees none of the first tenant’s runs or sessions', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(b.apiKey);
    await waitText('main', 'No runs yet.');
    await page.goto(`${stack.url}/console#/runs/${firstRun}`);
    await waitText('[role="alert"]', 'not found');
    await page.goto(`${stack.url}/console#/sessions`);
    await waitText('main', 'No sessions yet.');
    expect(requested.filter((url) => url.includes(a.apiKey) || url.includes(b.apiKey) || url.includes(stack.adminToken))).toEqual([]);
  });
});
