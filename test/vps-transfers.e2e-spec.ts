import { TestSshd } from '@app/testing';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, chown, readdir, readFile, stat, truncate, writeFile } from 'node:fs/promises';
import { callTool, CompletedToolCall } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

const MiB = 1024 * 1024;

/**
 * vps_upload and vps_download between a session's sandbox workspace (real Docker) and a real
 * OpenSSH server on loopback: round trips with checksums, the 256 MiB cap, containment of
 * workspace paths, and a connection killed mid-transfer leaving no partial file.
 */
describe('vps_upload and vps_download', () => {
  const sshd = new TestSshd();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let session = '';

  beforeAll(async () => {
    await sshd.start();
    stack = await new TestStack({
      env: { RUNBOX_CREDENTIALS_KEY: randomBytes(32).toString('base64'), RUNBOX_ALLOW_PRIVATE_HOSTS: `127.0.0.1:${sshd.port}` },
    }).start();
    tenant = await stack.createTenant();
    session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    for (const name of ['box', 'box-2']) {
      const res = await stack.request('POST', '/v1/servers', { key: tenant.apiKey, body: { name, host: '127.0.0.1', port: sshd.port, username: sshd.user, private_key: sshd.privateKey } });
      expect(res.status).toBe(201);
    }
  });

  afterAll(async () => {
    await stack?.stop();
    await sshd.stop();
  });

  const tool = (name: string, args: Record<string, unknown>): Promise<CompletedToolCall> => callTool(stack, tenant.apiKey, session, name, args);
  const sh = async (command: string): Promise<string> => {
    const res = await tool('terminal', { command });
    expect(res.metadata.exit_code).toBe(0);
    return res.output.replace(/^[\s\S]*?stdout:\n/, '');
  };
  const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
  /** A file in the test user's home, owned by the user, as if it had been put there over SSH. */
  const remoteFile = async (name: string, data: Buffer | number) => {
    const path = sshd.homePath(name);
    if (typeof data === 'number') {
      await writeFile(path, '');
      await truncate(path, data);
    } else {
      await writeFile(path, data);
    }
    await chmod(path, 0o644);
    const home = await stat(sshd.homePath('.'));
    await chown(path, home.uid, home.gid);
  };
  const leftovers = async () => (await readdir(sshd.homePath('.'))).filter((n) => n.includes('.runbox-'));

  it('uploads a workspace file and reports its size and SHA-256', async () => {
    const [local] = (await sh('head -c 3000001 /dev/urandom > data.bin && sha256sum data.bin')).split(' ');
    const res = await tool('vps_upload', { server: 'box', local_path: 'data.bin', remote_path: 'data.bin' });
    expect(res).toMatchObject({ is_error: false, metadata: { server: 'box', size: 3000001, sha256: local, local_path: 'data.bin', remote_path: 'data.bin' } });
    expect(res.output).toBe(`Uploaded data.bin to box:data.bin (3000001 bytes, sha256 ${local}).`);
    expect(sha256(await readFile(sshd.homePath('data.bin')))).toBe(local);
    expect(await leftovers()).toEqual([]);
  });

  it('downloads a server file into the workspace, making its directory', async () => {
    const data = randomBytes(2 * MiB + 5);
    await remoteFile('remote.bin', data);
    const res = await tool('vps_download', { server: 'box', remote_path: 'remote.bin', local_path: 'got/remote.bin' });
    expect(res).toMatchObject({ is_error: false, metadata: { size: data.length, sha256: sha256(data), local_path: 'got/remote.bin' } });
    expect((await sh('sha256sum got/remote.bin')).split(' ')[0]).toBe(sha256(data));
  });

  it('refuses files over 256 MiB in either direction, saying so, and moves nothing', async () => {
    await remoteFile('huge.img', 300 * MiB);
    const down = await tool('vps_download', { server: 'box', remote_path: 'huge.img', local_path: 'huge.img' });
    expect(down.is_error).toBe(true);
    expect(down.output).toBe(`box:huge.img is ${300 * MiB} bytes, over the 256 MiB (${256 * MiB} bytes) transfer cap`);
    await sh('truncate -s 300M sparse.img');
    const up = await tool('vps_upload', { server: 'box', local_path: 'sparse.img', remote_path: 'sparse.img' });
    expect(up.is_error).toBe(true);
    expect(up.output).toBe(`sparse.img is ${300 * MiB} bytes, over the ${256 * MiB}-byte transfer cap (256 MiB)`);
    expect(await sh('ls -a')).not.toMatch(/huge\.img/);
    await expect(stat(sshd.homePath('sparse.img'))).rejects.toThrow('ENOENT');
    expect(await leftovers()).toEqual([]);
  });

  it('keeps the workspace side inside the workspace', async () => {
    await sh('ln -sfn /etc escape');
    for (const local_path of ['/etc/passwd', '../etc/passwd', 'escape/passwd']) {
      const up = await tool('vps_upload', { server: 'box', local_path, remote_path: 'stolen' });
      expect({ local_path, is_error: up.is_error, outside: up.output.includes('outside the workspace') }).toEqual({ local_path, is_error: true, outside: true });
      const down = await tool('vps_download', { server: 'box', remote_path: 'remote.bin', local_path });
      expect({ local_path, is_error: down.is_error, outside: down.output.includes('outside the workspace') }).toEqual({ local_path, is_error: true, outside: true });
    }
    await expect(stat(sshd.homePath('stolen'))).rejects.toThrow('ENOENT');
  });

  it('names a missing file on either side', async () => {
    expect((await tool('vps_upload', { server: 'box', local_path: 'nope.bin', remote_path: 'x' })).output).toContain('not found: nope.bin');
    const down = await tool('vps_download', { server: 'box', remote_path: 'nope.bin', local_path: 'x' });
    expect(down).toMatchObject({ is_error: true });
    expect(down.output).toContain('box:nope.bin');
  });

  it('leaves no partial file when the connection is killed mid-transfer', async () => {
    await remoteFile('big.bin', 250 * MiB);
    // The previous content stays if the download fails.
    await sh('echo previous > big.bin');
    let finished = false;
    const transfer = tool('vps_download', { server: 'box-2', remote_path: 'big.bin', local_path: 'big.bin' }).finally(() => (finished = true));
    // Once the download's temp file exists in the workspace, the bytes are flowing: kill the
    // server side of every connection of the test user.
    while (!/\.big\.bin\.runbox-[0-9a-f]+\.tmp/.test(await sh('ls -a'))) {
      if (finished) throw new Error(`the download ended before it could be interrupted: ${(await transfer).output}`);
    }
    await sshd.dropConnections();
    const res = await transfer;
    expect(res.is_error).toBe(true);
    expect(res.output).toContain('box-2:big.bin');
    expect(await sh('cat big.bin')).toBe('previous');
    expect(await sh('ls -a')).not.toMatch(/runbox-[0-9a-f]+\.tmp/);
  });
});
