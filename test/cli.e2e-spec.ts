import { ScriptedModelServer } from '@app/testing';
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eventually, RunsClient } from './support/runs';
import { readRunEvents } from './support/sse';
import { TenantCredentials, TestStack } from './support/test-stack';

const REPO = join(__dirname, '..');
const BIN = join(REPO, 'apps', 'cli', 'bin', 'runbox.js');

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The `runbox` command as a user runs it (the real binary, a child process) against the
 * real gateway and executor, with the scripted model. HOME is a temporary folder, so
 * `runbox login` never touches the real one.
 */
describe('runbox CLI', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let runs: RunsClient;
  let home: string;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    tenant = await stack.createTenant();
    runs = new RunsClient(stack, tenant.apiKey);
    home = await mkdtemp(join(tmpdir(), 'runbox-cli-home-'));
    // The first start compiles the CLI (cached afterwards); done once here, not inside a test's budget.
    expect((await cli(['--help'])).code).toBe(0);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const base: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, RUNBOX_BASE_URL: stack.url, RUNBOX_API_KEY: tenant.apiKey, ...extra };
    for (const [k, v] of Object.entries(base)) if (v === '') delete base[k];
    return base;
  }

  /** Runs the CLI to its end, with no terminal attached. */
  function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
    return finish(spawn(process.execPath, [BIN, ...args], { cwd: REPO, env: env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  function finish(child: ChildProcess): Promise<CliResult> {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  it('`npx runbox` from the repository root runs the CLI', async () => {
    const { stdout } = await promisify(execFile)('npx', ['--no-install', 'runbox', '--help'], { cwd: REPO, env: env() });
    expect(stdout).toContain('usage: runbox COMMAND');
  });

  it('run: prints the answer and exits 0 when the run completes', async () => {
    model.enqueue({ toolCalls: [{ id: 'c1', name: 'terminal', arguments: { command: 'echo cli-was-here' } }] }, (req) => ({
      content: `tool said ${req.body.messages.find((m) => m.role === 'tool')?.content?.match(/cli-was-here/)?.[0]}`,
    }));
    const result = await cli(['run', 'use the terminal']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('tool said cli-was-here\n');
    // The live view (stderr, no terminal): the call with its arguments, and no colour codes.
    expect(result.stderr).toContain('terminal(command: "echo cli-was-here")');
    expect(result.stderr).not.toContain('\x1b[');
  });

  it('run --json: the finished run as JSON', async () => {
    model.enqueue({ content: 'json answer' });
    const result = await cli(['run', 'hi', '--json']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'completed', output: 'json answer', id: expect.stringMatching(/^run_/) });
  });

  it('run: exits 1 when the run fails', async () => {
    model.enqueue({ status: 400, body: '{"error":{"message":"model not found: nope"}}' });
    const result = await cli(['run', 'fail please']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/failed: .*model not found/);
  });

  it('run: exits 2 when the run is cancelled', async () => {
    model.enqueue({ toolCalls: [{ id: 'c_slow', name: 'terminal', arguments: { command: 'sleep 60' } }] });
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
    const pending = cli(['run', 'hold on', '--session', session]);
    const run = await eventually('the run to exist', async () => (await stack.request('GET', `/v1/runs?session_id=${session}`, { key: tenant.apiKey })).body.data[0]);
    // Cancelled while its tool call runs.
    await readRunEvents(stack.url, tenant.apiKey, run.id, { until: (e) => e.event === 'tool_call.started' });
    await runs.cancel(run.id);
    const result = await pending;
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('cancelled');
  });

  it('run: exits 3 and lists the waiting call when a run needs approval and no terminal is attached', async () => {
    model.enqueue({ toolCalls: [{ id: 'c_wait', name: 'terminal', arguments: { command: 'touch approved' } }] }, { content: 'done' });
    const result = await cli(['run', 'needs approval', '--approval', 'prompt', '--json']);
    expect(result.code).toBe(3);
    const run = JSON.parse(result.stdout);
    expect(run.status).toBe('requires_approval');
    expect(run.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'c_wait', name: 'terminal' })]);
    // Decided later with `runbox runs approve`, then followed with `runbox runs wait`.
    expect((await cli(['runs', 'approve', run.id, 'c_wait'])).code).toBe(0);
    // It replays the run's history, the wait that was decided since included.
    const waited = await cli(['runs', 'wait', run.id]);
    expect(waited).toMatchObject({ code: 0, stdout: 'done\n' });
  });

  /** The CLI in a pseudo-terminal (util-linux `script`), answering its prompts through the pty. */
  function inTerminal(args: string[], answers: Array<{ when: RegExp; type: string }>): Promise<CliResult> {
    const command = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: REPO, env: { ...env(), TERM: 'xterm', NO_COLOR: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      screen += chunk.toString();
      const next = answers[0];
      if (next && next.when.test(screen)) {
        answers.shift();
        screen = '';
        child.stdin!.write(next.type);
      }
    });
    return finish(child);
  }

  it('asks for approval on a terminal: approve runs the call, deny with a reason tells the model why', async () => {
    model.enqueue(
      { toolCalls: [{ id: 'c_yes', name: 'terminal', arguments: { command: 'echo approved-in-a-pty' } }] },
      { toolCalls: [{ id: 'c_no', name: 'terminal', arguments: { command: 'rm -rf /workspace/everything' } }] },
      (req) => ({ content: `results: ${req.body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join(' / ')}` }),
    );
    const result = await inTerminal(
      ['run', 'pty run', '--approval', 'prompt'],
      [
        { when: /approve\? \[y\]es/, type: 'y\r' },
        { when: /approve\? \[y\]es/, type: 'r\r' },
        { when: /reason: /, type: 'too dangerous\r' },
      ],
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('terminal(command: "echo approved-in-a-pty")');
    expect(result.stdout).toContain('results: ');
    expect(result.stdout).toContain('approved-in-a-pty');
    expect(result.stdout).toContain('too dangerous');
    const latest = (await stack.request('GET', '/v1/runs?limit=1', { key: tenant.apiKey })).body.data[0];
    const rows = await runs.toolCallRows(latest.id);
    expect(rows.map((r) => [r.call_id, r.decision])).toEqual([
      ['c_yes', 'approved'],
      ['c_no', 'denied'],
    ]);
  });

  it('sessions create|list|rm, exec, tools and runs list|show|logs with --json', async () => {
    const created = await cli(['sessions', 'create', '--metadata', 'team=cli', '--json']);
    expect(created.code).toBe(0);
    const session = JSON.parse(created.stdout);
    expect(session).toMatchObject({ id: expect.stringMatching(/^ses_/), metadata: { team: 'cli' } });

    const exec = await cli(['exec', session.id, '--', 'echo', 'hello', '&&', 'echo', 'oops', '>&2', '&&', '(exit 7)']);
    expect(exec).toMatchObject({ code: 7, stdout: 'hello\n', stderr: 'oops\n' });
    const execJson = JSON.parse((await cli(['exec', session.id, '--json', '--', 'pwd'])).stdout);
    expect(execJson).toMatchObject({ exit_code: 0, stdout: '/workspace' });

    const tools = JSON.parse((await cli(['tools', '--json'])).stdout);
    expect(tools.map((t: { name: string }) => t.name)).toContain('terminal');
    expect((await cli(['tools'])).stdout).toMatch(/^TOOL\s+TOOLSETS/);

    model.enqueue({ content: 'listed' });
    const done = JSON.parse((await cli(['run', 'list me', '--session', session.id, '--json'])).stdout);
    const listed = JSON.parse((await cli(['runs', 'list', '--session', session.id, '--json'])).stdout);
    expect(listed.map((r: { id: string }) => r.id)).toEqual([done.id]);
    expect(JSON.parse((await cli(['runs', 'show', done.id, '--json'])).stdout)).toMatchObject({ id: done.id, output: 'listed' });
    const logs = (await cli(['runs', 'logs', done.id, '--json'])).stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(logs[0]).toMatchObject({ id: 1, type: 'run.queued' });
    expect(logs[logs.length - 1]).toMatchObject({ type: 'run.completed', data: { output: 'listed' } });

    const sessions = JSON.parse((await cli(['sessions', 'list', '--json'])).stdout);
    expect(sessions.map((s: { id: string }) => s.id)).toContain(session.id);
    expect((await cli(['sessions', 'list'])).stdout).toContain(session.id);
    expect((await cli(['sessions', 'rm', session.id])).code).toBe(0);
    expect(JSON.parse((await cli(['sessions', 'list', '--json'])).stdout).map((s: { id: string }) => s.id)).not.toContain(session.id);
    const gone = await cli(['runs', 'show', 'run_doesnotexist000000', '--json']);
    expect(gone.code).toBe(1);
    expect(JSON.parse(gone.stdout)).toMatchObject({ error: { code: 'not_found', status: 404 } });
  });

  it('cp copies a binary file up and back down unchanged (sha256), and to stdout', async () => {
    const session = JSON.parse((await cli(['sessions', 'create', '--json'])).stdout).id as string;
    const original = randomBytes(2 * 1024 * 1024 + 17);
    const local = join(home, 'original.bin');
    await writeFile(local, original);
    const sha = createHash('sha256').update(original).digest('hex');

    const up = await cli(['cp', local, `${session}:in/`, '--json']);
    expect(up.code).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({ path: 'in/original.bin', size: original.length, sha256: sha });
    const back = join(home, 'back.bin');
    const down = await cli(['cp', `${session}:in/original.bin`, back, '--json']);
    expect(down.code).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ size: original.length, sha256: sha });
    expect(createHash('sha256').update(await readFile(back)).digest('hex')).toBe(sha);

    const text = await cli(['exec', session, '--', 'printf', "'a\\0b'", '>', 'z.bin']);
    expect(text.code).toBe(0);
    const piped = spawn(process.execPath, [BIN, 'cp', `${session}:z.bin`, '-'], { cwd: REPO, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    piped.stdout!.on('data', (c: Buffer) => chunks.push(c));
    expect((await finish(piped)).code).toBe(0);
    expect(Buffer.concat(chunks)).toEqual(Buffer.from([0x61, 0x00, 0x62]));

    const missing = await cli(['cp', `${session}:nope.bin`, join(home, 'nope.bin')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not_found');
    await expect(stat(join(home, 'nope.bin'))).rejects.toThrow();
    expect((await cli(['sessions', 'rm', session])).code).toBe(0);
  });

  it('login stores the address and key with mode 0600 under XDG_CONFIG_HOME, and later commands use them', async () => {
    const xdg = join(home, 'xdg');
    const login = await cli(['login', '--base-url', stack.url, '--api-key', tenant.apiKey], { XDG_CONFIG_HOME: xdg, RUNBOX_BASE_URL: '', RUNBOX_API_KEY: '' });
    expect(login.code).toBe(0);
    const file = join(xdg, 'runbox', 'config.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ base_url: stack.url, api_key: tenant.apiKey });
    const after = await cli(['sessions', 'create', '--json'], { XDG_CONFIG_HOME: xdg, RUNBOX_BASE_URL: '', RUNBOX_API_KEY: '' });
    expect(after.code).toBe(0);
    expect(JSON.parse(after.stdout).id).toMatch(/^ses_/);

    const refused = await cli(['login', '--base-url', stack.url, '--api-key', 'rbx_wrong'], { XDG_CONFIG_HOME: xdg, RUNBOX_BASE_URL: '', RUNBOX_API_KEY: '' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('does not accept this API key');
    // The stored login is kept.
    expect(JSON.parse(await readFile(file, 'utf8')).api_key).toBe(tenant.apiKey);
  });

  it('refuses bad command lines with a usage message', async () => {
    const result = await cli(['run', 'x', '--approval', 'sometimes']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('--approval must be one of auto, prompt, deny');
    expect((await cli(['nonsense'])).stderr).toContain("no command 'nonsense'");
  });
});
