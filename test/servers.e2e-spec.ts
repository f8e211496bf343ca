import { freePort, TestSshd } from '@app/testing';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PrismaService } from '@app/persistence';
import { CredentialCipher, credentialsAad as aad } from '@app/ssh';
import { rotateCredentials } from '../apps/gateway/src/servers/credential-rotation';
import { callTool, CompletedToolCall } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

const run = promisify(execFile);

/**
 * Saved servers and vps_run against a real OpenSSH server on a loopback port (allowed through
 * RUNBOX_ALLOW_PRIVATE_HOSTS, as an operator would): key and password auth, wrong
 * credentials, a server that is down, host-key pinning and re-pinning, timeouts, tenant
 * isolation, and credentials kept out of answers, logs and the database.
 */
describe('saved servers over SSH', () => {
  const sshd = new TestSshd();
  const logDir = mkdtempSync(join(tmpdir(), 'runbox-servers-'));
  const logFile = join(logDir, 'services.log');
  const passphrase = `pp-${randomBytes(8).toString('hex')}`;
  let downPort = 0;
  let stack: TestStack;
  let acme: TenantCredentials;
  let globex: TenantCredentials;
  let session = '';
  const answers: string[] = [];

  beforeAll(async () => {
    await sshd.start();
    downPort = await freePort();
    stack = await new TestStack({
      executor: false,
      env: {
        RUNBOX_CREDENTIALS_KEY: randomBytes(32).toString('base64'),
        RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${sshd.port},127.0.0.1:${downPort}`,
        RUNBOX_LOG_FILE: logFile,
        RUNBOX_LOG_LEVEL: 'trace',
      },
    }).start();
    [acme, globex] = await Promise.all([stack.createTenant(), stack.createTenant()]);
    session = (await stack.request('POST', '/v1/sessions', { key: acme.apiKey, body: {} })).body.id;
  });

  afterAll(async () => {
    await stack?.stop();
    await sshd.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  const request = async (...args: Parameters<TestStack['request']>) => {
    const res = await stack.request(...args);
    answers.push(res.text);
    return res;
  };
  const save = (key: string, body: Record<string, unknown>) => request('POST', '/v1/servers', { key, body: { host: '127.0.0.1', port: sshd.port, username: sshd.user, ...body } });
  const vpsRun = async (args: Record<string, unknown>, key = acme.apiKey, sessionId = session): Promise<CompletedToolCall> => {
    const result = await callTool(stack, key, sessionId, 'vps_run', args);
    answers.push(JSON.stringify(result));
    return result;
  };

  it('runs a command with key auth, pinning the host key on first connect', async () => {
    const created = await save(acme.apiKey, { name: 'web-1', private_key: sshd.privateKey });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'web-1', host: '127.0.0.1', port: sshd.port, username: sshd.user, auth: 'key', host_key_fingerprint: null });
    expect(Object.keys(created.body)).not.toContain('private_key');

    const result = await vpsRun({ server: 'web-1', command: 'echo "hello from $(whoami)"; echo oops >&2; exit 3' });
    expect(result.is_error).toBe(false);
    expect(result.output).toBe(`status: exited\nexit_code: 3\nstdout:\nhello from ${sshd.user}\nstderr:\noops`);
    expect(result.metadata).toMatchObject({ server: 'web-1', exit_code: 3, timed_out: false });

    const shown = await request('GET', `/v1/servers/${created.body.id}`, { key: acme.apiKey });
    expect(shown.body.host_key_fingerprint).toBe(await sshd.hostKeyFingerprint());
    expect(shown.body.host_key_pinned_at).toEqual(expect.any(String));
  });

  it('reports a command killed by a signal as 128 + signal', async () => {
    const result = await vpsRun({ server: 'web-1', command: 'kill -TERM $$' });
    expect(result.metadata).toMatchObject({ exit_code: 143, signal: 'TERM' });
  });

  it('runs with password auth and with a passphrase-protected key', async () => {
    expect((await save(acme.apiKey, { name: 'pw', password: sshd.password })).status).toBe(201);
    expect((await vpsRun({ server: 'pw', command: 'whoami' })).output).toBe(`status: exited\nexit_code: 0\nstdout:\n${sshd.user}`);

    const encrypted = await sshd.encryptedKey(passphrase);
    expect((await save(acme.apiKey, { name: 'pp', private_key: encrypted, passphrase })).status).toBe(201);
    expect((await vpsRun({ server: 'pp', command: 'echo ok' })).output).toContain('stdout:\nok');
  });

  it('says clearly when the credentials are refused or the server is down', async () => {
    await save(acme.apiKey, { name: 'wrong-key', private_key: sshd.strangerKey });
    await save(acme.apiKey, { name: 'wrong-pw', password: 'not-the-password' });
    await save(acme.apiKey, { name: 'down', port: downPort, password: 'x' });
    for (const name of ['wrong-key', 'wrong-pw']) {
      const result = await vpsRun({ server: name, command: 'true' });
      expect(result).toMatchObject({ is_error: true, output: `server "${name}" (127.0.0.1:${sshd.port}) refused the credentials for user ${sshd.user}` });
    }
    const down = await vpsRun({ server: 'down', command: 'true' });
    expect(down).toMatchObject({ is_error: true, output: `server "down" (127.0.0.1:${downPort}) refused the connection (nothing listens on that port)` });
  });

  it('refuses loopback and private hosts the operator did not allow', async () => {
    const otherPort = await freePort();
    await save(acme.apiKey, { name: 'internal', port: otherPort, password: 'x' });
    await save(acme.apiKey, { name: 'metadata', host: '169.254.169.254', port: 22, password: 'x' });
    expect((await vpsRun({ server: 'internal', command: 'true' })).output).toBe(`127.0.0.1:${otherPort} is a loopback address; outbound tools may only reach public addresses`);
    expect((await vpsRun({ server: 'metadata', command: 'true' })).output).toMatch(/^169\.254\.169\.254:22 is a [a-z-]+ address; outbound tools may only reach public addresses$/);
  });

  it("applies the tenant's egress domain rules to its servers, read at each connection", async () => {
    const rules = (egress: { allow: string[]; deny: string[] }) =>
      stack.request('PATCH', `/v1/admin/tenants/${acme.tenantId}`, { key: stack.adminToken, body: { egress } });
    expect((await rules({ allow: [], deny: ['127.0.0.1'] })).status).toBe(200);
    try {
      const refused = await vpsRun({ server: 'web-1', command: 'true' });
      expect(refused).toMatchObject({ is_error: true, output: expect.stringContaining("127.0.0.1 is on this tenant's egress deny list") });
    } finally {
      expect((await rules({ allow: [], deny: [] })).status).toBe(200);
    }
    expect((await vpsRun({ server: 'web-1', command: 'echo back' })).output).toContain('stdout:\nback');
  });

  it('closes the channel at the timeout and says so', async () => {
    const result = await vpsRun({ server: 'web-1', command: 'echo started; sleep 60', timeout_seconds: 1 });
    expect(result.is_error).toBe(true);
    expect(result.output).toMatch(/^status: timed_out\nexit_code: unknown\nnote: timed out after 1 seconds; the channel was closed/);
    expect(result.output).toContain('stdout:\nstarted');
    expect(result.metadata).toMatchObject({ timed_out: true });
  });

  it('lists the saved servers when no command is given', async () => {
    const listed = await vpsRun({});
    expect(listed.metadata.servers.map((s: { name: string }) => s.name)).toEqual(['down', 'internal', 'metadata', 'pp', 'pw', 'web-1', 'wrong-key', 'wrong-pw']);
    expect(listed.output).toContain(`web-1\t${sshd.user}@127.0.0.1:${sshd.port}\t${await sshd.hostKeyFingerprint()}`);
  });

  it('refuses a changed host key naming both fingerprints, until the tenant re-pins it', async () => {
    const id = (await request('GET', '/v1/servers', { key: acme.apiKey })).body.data.find((s: { name: string }) => s.name === 'web-1').id;
    const pinned = await sshd.hostKeyFingerprint();
    // As after a reinstall: the old connections die with the old server.
    await sshd.regenerateHostKey();
    await sshd.dropConnections();
    const presented = await sshd.hostKeyFingerprint();
    expect(presented).not.toBe(pinned);

    const refused = await vpsRun({ server: 'web-1', command: 'echo should-not-run' });
    expect(refused.is_error).toBe(true);
    expect(refused.output).toContain(`the host key of server "web-1" changed: pinned ${pinned}, presented ${presented}`);
    expect((await request('GET', `/v1/servers/${id}`, { key: acme.apiKey })).body.host_key_fingerprint).toBe(pinned);

    const badRepin = await request('POST', `/v1/servers/${id}/repin`, { key: acme.apiKey, body: { fingerprint: 'MD5:aa' } });
    expect(badRepin.status).toBe(400);
    expect(badRepin.body.error.message).toContain('fingerprint');
    const repinned = await request('POST', `/v1/servers/${id}/repin`, { key: acme.apiKey, body: { fingerprint: presented } });
    expect(repinned.status).toBe(200);
    expect(repinned.body.host_key_fingerprint).toBe(presented);
    expect((await vpsRun({ server: 'web-1', command: 'echo again' })).output).toContain('stdout:\nagain');
  });

  it("keeps a tenant's servers from every other tenant", async () => {
    const listed = await request('GET', '/v1/servers', { key: acme.apiKey });
    const id = listed.body.data.find((s: { name: string }) => s.name === 'web-1').id;
    expect((await request('GET', '/v1/servers', { key: globex.apiKey })).body.data).toEqual([]);
    expect((await request('GET', `/v1/servers/${id}`, { key: globex.apiKey })).status).toBe(404);
    expect((await request('PATCH', `/v1/servers/${id}`, { key: globex.apiKey, body: { name: 'mine' } })).status).toBe(404);
    expect((await request('POST', `/v1/servers/${id}/repin`, { key: globex.apiKey, body: {} })).status).toBe(404);
    expect((await request('DELETE', `/v1/servers/${id}`, { key: globex.apiKey })).status).toBe(404);
    const globexSession = (await request('POST', '/v1/sessions', { key: globex.apiKey, body: {} })).body.id;
    const used = await vpsRun({ server: 'web-1', command: 'true' }, globex.apiKey, globexSession);
    expect(used).toMatchObject({ is_error: true, output: 'no saved server is named "web-1"; this tenant has no saved servers (POST /v1/servers)' });
    // The same name is free for the other tenant; a second one in one tenant is a conflict.
    expect((await save(globex.apiKey, { name: 'web-1', password: 'x' })).status).toBe(201);
    const dup = await save(acme.apiKey, { name: 'web-1', password: 'x' });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toEqual({ code: 'conflict', message: 'a server named "web-1" already exists' });
  });

  it('answers bad input with a 400 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ name: 'x', password: 'a', private_key: sshd.privateKey }, 'password'],
      [{ name: 'x' }, 'private_key'],
      [{ name: 'has space', password: 'a' }, 'name'],
      [{ name: 'x', password: 'a', port: 70000 }, 'port'],
      [{ name: 'x', private_key: 'not a key' }, 'private_key'],
      [{ name: 'x', password: 'a', passphrase: 'b' }, 'passphrase'],
    ];
    for (const [body, field] of cases) {
      const res = await save(acme.apiKey, body);
      expect({ field, status: res.status, code: res.body.error.code }).toEqual({ field, status: 400, code: 'validation_failed' });
      expect(res.body.error.message).toContain(`body.${field}`);
    }
  });

  it('PATCH replaces credentials and a new host drops the pin; DELETE removes the server', async () => {
    const created = await save(acme.apiKey, { name: 'moving', password: 'wrong' });
    expect((await vpsRun({ server: 'moving', command: 'true' })).is_error).toBe(true);
    const patched = await request('PATCH', `/v1/servers/${created.body.id}`, { key: acme.apiKey, body: { private_key: sshd.privateKey } });
    expect(patched.body.auth).toBe('key');
    expect((await vpsRun({ server: 'moving', command: 'echo moved' })).output).toContain('stdout:\nmoved');
    expect((await request('GET', `/v1/servers/${created.body.id}`, { key: acme.apiKey })).body.host_key_fingerprint).toMatch(/^SHA256:/);
    const rehosted = await request('PATCH', `/v1/servers/${created.body.id}`, { key: acme.apiKey, body: { host: 'localhost' } });
    expect(rehosted.body).toMatchObject({ host: 'localhost', host_key_fingerprint: null });
    expect((await request('DELETE', `/v1/servers/${created.body.id}`, { key: acme.apiKey })).status).toBe(204);
    expect((await request('GET', `/v1/servers/${created.body.id}`, { key: acme.apiKey })).status).toBe(404);
  });

  it("runs an ssh session's terminal on the server, keeping cd and export across calls", async () => {
    const created = await request('POST', '/v1/sessions', { key: acme.apiKey, body: { backend: { type: 'ssh', server: 'web-1' } } });
    expect(created.body.backend).toEqual({ type: 'ssh', server: 'web-1' });
    const id = created.body.id;
    expect((await request('GET', `/v1/sessions/${id}`, { key: acme.apiKey })).body.backend).toEqual({ type: 'ssh', server: 'web-1' });
    const terminal = (args: Record<string, unknown>) => callTool(stack, acme.apiKey, id, 'terminal', args);

    const first = await terminal({ command: 'cd /tmp && export GREETING=hello && pwd' });
    expect(first).toMatchObject({ is_error: false, output: 'status: exited\nexit_code: 0\nstdout:\n/tmp' });
    const second = await terminal({ command: 'pwd; echo "$GREETING from $(whoami)"' });
    expect(second.output).toBe(`status: exited\nexit_code: 0\nstdout:\n/tmp\nhello from ${sshd.user}`);
    expect((await terminal({ command: 'kill -TERM $$' })).metadata).toMatchObject({ exit_code: 143, backend: 'ssh' });
    const slow = await terminal({ command: 'sleep 30', timeout_seconds: 1 });
    expect(slow).toMatchObject({ is_error: true, metadata: { timed_out: true } });
    // A fresh session starts in its own directory, with none of the other session's state.
    const other = (await request('POST', '/v1/sessions', { key: acme.apiKey, body: { backend: { type: 'ssh', server: 'web-1' } } })).body.id;
    const fresh = await callTool(stack, acme.apiKey, other, 'terminal', { command: 'pwd; echo "[$GREETING]"' });
    expect(fresh.output).toBe(`status: exited\nexit_code: 0\nstdout:\n${sshd.homePath(`runbox/${other}`)}\n[]`);

    const read = await callTool(stack, acme.apiKey, id, 'read_file', { path: 'x.txt' });
    expect(read).toMatchObject({ is_error: true });
    expect(read.output).toContain('read_file is not available in a session whose backend is a saved SSH server');
  });

  it("turns an ssh session's call still running after max_wait_ms into a background job with a handle", async () => {
    const id = (await request('POST', '/v1/sessions', { key: acme.apiKey, body: { backend: { type: 'ssh', server: 'web-1' } } })).body.id;
    const terminal = (args: Record<string, unknown>) => callTool(stack, acme.apiKey, id, 'terminal', args);
    const statusOf = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    // Waits on the server until the job's status.json records its end (no sleeping for order).
    const untilExited = (statusFile: string) => terminal({ command: `until grep -q '"status": "exited"' '${statusFile}'; do sleep 0.05; done`, max_wait_ms: 60_000, timeout_seconds: 30 });

    await terminal({ command: 'cd /tmp' });
    const job = await terminal({ command: 'sleep 1; echo finished; echo warned >&2', max_wait_ms: 250 });
    expect(job).toMatchObject({ is_error: false, metadata: { background: true, exit_code: null, backend: 'ssh' } });
    const { job_id, pid, status_file, stdout_file, stderr_file } = job.metadata as Record<string, string>;
    const dir = sshd.homePath(`runbox/${id}/.runbox/jobs/${job_id}`);
    expect([status_file, stdout_file, stderr_file]).toEqual([`${dir}/status.json`, `${dir}/stdout.txt`, `${dir}/stderr.txt`]);
    expect(job.output.split('\n').slice(0, 7)).toEqual([
      'status: running',
      `note: still running after 250 ms, so it goes on as a background job (not killed). Its files keep being written; stop it with: kill -- -${pid}`,
      `job_id: ${job_id}`,
      `pid: ${pid}`,
      `status_file: ${status_file}`,
      `stdout_file: ${stdout_file}`,
      `stderr_file: ${stderr_file}`,
    ]);
    expect(statusOf(status_file)).toMatchObject({ job_id, pid, status: 'running', exit_code: null });

    await untilExited(status_file);
    expect(statusOf(status_file)).toMatchObject({ job_id, pid, status: 'exited', exit_code: 0 });
    expect(readFileSync(stdout_file, 'utf8')).toBe('finished\n');
    expect(readFileSync(stderr_file, 'utf8')).toBe('warned\n');
    // The job kept the session's state, and the later calls still have it.
    expect((await terminal({ command: 'pwd' })).output).toBe('status: exited\nexit_code: 0\nstdout:\n/tmp');

    // `kill -- -<pid>` stops the whole group, the job's child sleep included: 128 + SIGTERM.
    const long = await terminal({ command: 'sleep 300 & sleep 300; wait', max_wait_ms: 250 });
    const handle = long.metadata as Record<string, string | number>;
    const killed = await terminal({ command: `kill -- -${handle.pid} && echo sent` });
    expect(killed.output).toBe('status: exited\nexit_code: 0\nstdout:\nsent');
    await untilExited(String(handle.status_file));
    expect(statusOf(String(handle.status_file))).toMatchObject({ pid: handle.pid, status: 'exited', exit_code: 143 });
    // Its members die as the signal reaches them (zombies, reaped by init, do not count); a
    // child the kill missed would keep this call waiting until its timeout.
    const members = `ps -e -o pgid=,stat= | awk -v g=${handle.pid} '$1 == g && $2 !~ /^Z/'`;
    const group = await terminal({ command: `until [ -z "$(${members})" ]; do sleep 0.05; done; echo gone`, timeout_seconds: 10 });
    expect(group.output).toBe('status: exited\nexit_code: 0\nstdout:\ngone');
  });

  it('lets a session choose only an ssh backend, on one of its own servers', async () => {
    const docker = await request('POST', '/v1/sessions', { key: acme.apiKey, body: { backend: { type: 'docker', server: 'pw' } } });
    expect(docker.status).toBe(400);
    expect(docker.body.error.message).toContain('body.backend.type');
    const unknown = await request('POST', '/v1/sessions', { key: acme.apiKey, body: { backend: { type: 'ssh', server: 'nope' } } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toContain('body.backend.server: no saved server is named "nope"');
    const foreign = await request('POST', '/v1/sessions', { key: globex.apiKey, body: { backend: { type: 'ssh', server: 'pw' } } });
    expect(foreign.status).toBe(400);
  });

  it('re-seals every credential with a new key during a rotation', async () => {
    const oldKey = stack.config.RUNBOX_CREDENTIALS_KEY!;
    const newKey = randomBytes(32).toString('base64');
    const db = new PrismaService({ url: stack.db.appUrl, systemUrl: stack.db.url });
    try {
      const before = await db.system((tx) => tx.savedServer.findMany({ select: { id: true, tenantId: true, credentials: true } }));
      expect(before.length).toBeGreaterThan(5);
      const report = await rotateCredentials(db, new CredentialCipher(newKey, [oldKey]));
      expect(report).toEqual({ resealed: before.length, current: 0, skipped: 0 });
      const after = await db.system((tx) => tx.savedServer.findMany({ select: { id: true, tenantId: true, credentials: true } }));
      const onlyNew = new CredentialCipher(newKey);
      for (const row of after) {
        const was = before.find((b) => b.id === row.id)!;
        expect(row.credentials.split('.')[1]).toBe(onlyNew.currentKeyId);
        expect(onlyNew.open(row.credentials, aad(row.tenantId, row.id))).toBe(new CredentialCipher(oldKey).open(was.credentials, aad(was.tenantId, was.id)));
      }
      expect(await rotateCredentials(db, new CredentialCipher(newKey, [oldKey]))).toEqual({ resealed: 0, current: before.length, skipped: 0 });
    } finally {
      await db.close();
    }
  });

  it('keeps credentials out of API answers, logs and the database dump', async () => {
    const secrets: Record<string, string> = {
      'private key body': sshd.privateKey.split('\n')[2],
      'password': sshd.password,
      'passphrase': passphrase,
    };
    // As runbox_system, whose policies see every tenant's rows (row-level security is forced even for the owner).
    const { stdout: dump } = await run('pg_dump', ['--data-only', '--enable-row-security', '--exclude-table=_prisma_migrations', stack.db.url], { maxBuffer: 64 * 1024 * 1024 });
    // The dump does hold the servers, sealed.
    expect(dump).toMatch(/COPY public\.servers/);
    expect(dump).toMatch(/\tv1\.[0-9a-f]{8}\./);
    await stack.stop();
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('"service":"gateway"');
    for (const [what, value] of Object.entries(secrets)) {
      expect({ what, inAnswers: answers.filter((a) => a.includes(value)).length }).toEqual({ what, inAnswers: 0 });
      expect({ what, inLogs: log.includes(value) }).toEqual({ what, inLogs: false });
      expect({ what, inDump: dump.includes(value) }).toEqual({ what, inDump: false });
    }
  });
});

describe('saved servers without RUNBOX_CREDENTIALS_KEY', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;

  beforeAll(async () => {
    stack = await new TestStack({ executor: false }).start();
    tenant = await stack.createTenant();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('answers 503 naming the missing key, and marks the vps_* tools unavailable', async () => {
    const res = await stack.request('POST', '/v1/servers', { key: tenant.apiKey, body: { name: 'a', host: 'example.com', username: 'u', password: 'p' } });
    expect(res.status).toBe(503);
    expect(res.body.error.message).toContain('RUNBOX_CREDENTIALS_KEY');
    const tools = (await stack.request('GET', '/v1/tools', { key: tenant.apiKey })).body.data;
    for (const name of ['vps_run', 'vps_upload', 'vps_download']) {
      expect(tools.find((t: { name: string }) => t.name === name)).toMatchObject({ available: false, unavailable_reason: expect.stringContaining('RUNBOX_CREDENTIALS_KEY') });
    }
  });
});
