import { eventually } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';

interface ToolResult {
  output: string;
  metadata: Record<string, any>;
  is_error: boolean;
}

/** The terminal tool through POST /v1/sessions/{id}/tools/terminal, in a real sandbox. */
describe('terminal tool', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;

  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  const terminal = async (sessionId: string, args: Record<string, unknown>): Promise<ToolResult> => {
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/terminal`, { key: tenant.apiKey, body: { arguments: args } });
    expect(res.status).toBe(200);
    return res.body;
  };
  const readJson = async (sessionId: string, path: string) => JSON.parse((await terminal(sessionId, { command: `cat ${path}` })).output.split('stdout:\n')[1]);

  beforeAll(async () => {
    stack = await new TestStack().start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('keeps the working directory, variables, functions and aliases between calls', async () => {
    const id = await newSession();
    await terminal(id, { command: 'mkdir -p proj/sub && cd proj/sub && export EXPORTED=1 && PLAIN=2 && greet() { echo "hi $1"; } && alias ll="echo listed"' });
    const result = await terminal(id, { command: 'pwd; echo "$EXPORTED $PLAIN"; greet you; ll' });
    expect(result.output).toContain('/workspace/proj/sub\n1 2\nhi you\nlisted');
  });

  it('kills the whole process group on timeout, says so with the output so far, and the next call works', async () => {
    const id = await newSession();
    await terminal(id, { command: 'cd /tmp && export BEFORE=kept' });
    const timedOut = await terminal(id, { command: '(sleep 300 &); echo partial-output; sleep 300', timeout_seconds: 1 });
    expect(timedOut.is_error).toBe(true);
    expect(timedOut.metadata).toMatchObject({ timed_out: true });
    expect(timedOut.output).toContain('status: timed_out');
    expect(timedOut.output).toMatch(/timed out after 1 seconds/);
    expect(timedOut.output).toContain('partial-output');

    const next = await terminal(id, { command: 'echo "$PWD $BEFORE"; pgrep -x sleep || echo no-sleep-left' });
    expect(next.is_error).toBe(false);
    expect(next.output).toContain('/tmp kept');
    expect(next.output).toContain('no-sleep-left');
  });

  it('turns a long command into a background job that finishes after the call returned', async () => {
    const id = await newSession();
    const started = await terminal(id, { command: 'echo first-line; sleep 2; echo done-line', max_wait_ms: 250 });
    expect(started.is_error).toBe(false);
    expect(started.output).toContain('status: running');
    expect(started.output).toContain('first-line');
    const { job_id: jobId, pid, status_file: statusFile, stdout_file: stdoutFile, stderr_file: stderrFile } = started.metadata;
    expect(started.metadata.background).toBe(true);
    expect(pid).toEqual(expect.any(Number));
    expect(statusFile).toBe(`/workspace/.runbox/jobs/${jobId}/status.json`);
    expect(stdoutFile).toBe(`/workspace/.runbox/jobs/${jobId}/stdout.txt`);
    expect(stderrFile).toBe(`/workspace/.runbox/jobs/${jobId}/stderr.txt`);
    expect(started.output).toContain(`kill -- -${pid}`);

    const status = await eventually('the job to finish', async () => {
      const s = await readJson(id, statusFile);
      return s.status === 'exited' ? s : undefined;
    });
    expect(status).toMatchObject({ job_id: jobId, pid, exit_code: 0 });
    const out = await terminal(id, { command: `cat ${stdoutFile}` });
    expect(out.output).toContain('first-line\ndone-line');
  });

  it('stops a background job with kill -- -<pid>, reported as 128 + SIGTERM', async () => {
    const id = await newSession();
    const started = await terminal(id, { command: 'sleep 300', max_wait_ms: 250 });
    const { pid, status_file: statusFile } = started.metadata;
    await terminal(id, { command: `kill -- -${pid}` });
    const status = await eventually('the job to end', async () => {
      const s = await readJson(id, statusFile);
      return s.status === 'exited' ? s : undefined;
    });
    expect(status.exit_code).toBe(143);
  });

  it('reports 137 for a command killed with SIGKILL, in the result and its metadata', async () => {
    const id = await newSession();
    const result = await terminal(id, { command: 'kill -9 $$' });
    expect(result.output).toContain('exit_code: 137');
    expect(result.metadata.exit_code).toBe(137);
    const plain = await terminal(id, { command: 'exit 3' });
    expect(plain.metadata.exit_code).toBe(3);
    expect(plain.is_error).toBe(false);
  });

  it('cuts output past max_output_chars and says how much was cut', async () => {
    const id = await newSession();
    const result = await terminal(id, { command: "head -c 50000 /dev/zero | tr '\\0' a" });
    expect(result.output.length).toBeLessThan(30_500);
    expect(result.output).toMatch(/… \d+ characters cut \(max_output_chars=30000\)/);
    expect(result.output).toContain('a'.repeat(1000));
  });

  it('refuses a timeout beyond 900 seconds and unknown arguments, naming them', async () => {
    const id = await newSession();
    const tooLong = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, {
      key: tenant.apiKey,
      body: { arguments: { command: 'true', timeout_seconds: 901 } },
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.message).toContain('timeout_seconds');
    const missing = await stack.request('POST', `/v1/sessions/${id}/tools/terminal`, { key: tenant.apiKey, body: { arguments: {} } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toContain('command');
  });
});
