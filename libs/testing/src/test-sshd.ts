import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './test-nats';

const run = promisify(execFile);
const SSHD = '/usr/sbin/sshd';

/**
 * A real OpenSSH server on a loopback port for one test file: its own host key, config and
 * authorized keys in a temp dir, and a throwaway system user (sshd authenticates real
 * accounts only) with a password and a key. `stop()` kills sshd, deletes the user and the
 * temp dir. Needs root and Debian's openssh-server (`scripts/infra.sh test-tools`).
 */
export class TestSshd {
  readonly user = `rbx-ssh-${randomBytes(4).toString('hex')}`;
  readonly password = randomBytes(12).toString('base64url');
  port = 0;
  dir = '';
  /** The user's private key (OpenSSH format) and a second key the server does not know. */
  privateKey = '';
  strangerKey = '';
  private home = '';
  private process?: ChildProcess;
  private userCreated = false;
  private output = '';

  async start(): Promise<this> {
    if (!existsSync(SSHD)) throw new Error(`${SSHD} is missing: run scripts/infra.sh test-tools as root (it installs openssh-server)`);
    this.dir = await mkdtemp(join(tmpdir(), 'runbox-sshd-'));
    await chmod(this.dir, 0o755);
    this.home = join(this.dir, 'home');
    await mkdir(this.home);
    // sshd's privilege separation needs this empty directory; Debian's service start makes it.
    await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    await run('useradd', ['--no-create-home', '--home-dir', this.home, '--shell', '/bin/bash', this.user]);
    this.userCreated = true;
    await run('sh', ['-c', `echo '${this.user}:${this.password}' | chpasswd`]);
    await chown(this.home, ...(await this.ids()));

    await this.keygen('client_key');
    await this.keygen('stranger_key');
    this.privateKey = await readFile(join(this.dir, 'client_key'), 'utf8');
    this.strangerKey = await readFile(join(this.dir, 'stranger_key'), 'utf8');
    await writeFile(join(this.dir, 'authorized_keys'), await readFile(join(this.dir, 'client_key.pub')));
    await this.keygen('ssh_host_ed25519_key');
    this.port = await freePort();
    await writeFile(join(this.dir, 'sshd_config'), this.config());
    await this.launch();
    return this;
  }

  /** The user's key, protected with `passphrase` (ssh2 opens it with the same passphrase). */
  async encryptedKey(passphrase: string): Promise<string> {
    const path = join(this.dir, `protected_key_${randomBytes(4).toString('hex')}`);
    await writeFile(path, this.privateKey, { mode: 0o600 });
    await run('ssh-keygen', ['-q', '-p', '-N', passphrase, '-f', path]);
    return readFile(path, 'utf8');
  }

  /** The host key's fingerprint as OpenSSH prints it (`SHA256:…`). */
  async hostKeyFingerprint(): Promise<string> {
    const { stdout } = await run('ssh-keygen', ['-lf', join(this.dir, 'ssh_host_ed25519_key.pub')]);
    return stdout.split(' ')[1];
  }

  /** A new host key, as after a reinstall: sshd restarts on the same port with it. */
  async regenerateHostKey(): Promise<void> {
    await this.kill();
    await rm(join(this.dir, 'ssh_host_ed25519_key'), { force: true });
    await rm(join(this.dir, 'ssh_host_ed25519_key.pub'), { force: true });
    await this.keygen('ssh_host_ed25519_key');
    await this.launch();
  }

  /** Kills every sshd session process of the test user (their connections drop), sshd itself stays. */
  async dropConnections(): Promise<void> {
    await run('pkill', ['-KILL', '-u', this.user]).catch(() => undefined);
  }

  /** Path of a file in the test user's home directory. */
  homePath(name: string): string {
    return join(this.home, name);
  }

  async stop(): Promise<void> {
    await this.kill();
    if (this.userCreated) {
      await run('pkill', ['-KILL', '-u', this.user]).catch(() => undefined);
      await run('userdel', [this.user]).catch(() => undefined);
    }
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  private config(): string {
    return [
      `Port ${this.port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(this.dir, 'ssh_host_ed25519_key')}`,
      `PidFile ${join(this.dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(this.dir, 'authorized_keys')}`,
      `AllowUsers ${this.user}`,
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication yes',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication yes',
      'PermitRootLogin no',
      'Subsystem sftp internal-sftp',
      'MaxStartups 100',
      'MaxSessions 50',
      'LogLevel ERROR',
      '',
    ].join('\n');
  }

  private async ids(): Promise<[number, number]> {
    const uid = Number((await run('id', ['-u', this.user])).stdout.trim());
    const gid = Number((await run('id', ['-g', this.user])).stdout.trim());
    return [uid, gid];
  }

  private async keygen(name: string): Promise<void> {
    await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', join(this.dir, name)]);
    await chmod(join(this.dir, name), 0o600);
  }

  private async launch(): Promise<void> {
    const child = spawn(SSHD, ['-D', '-e', '-f', join(this.dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.process = child;
    child.stderr?.on('data', (d: Buffer) => (this.output = (this.output + d.toString()).slice(-4000)));
    const deadline = Date.now() + 15_000;
    while (!(await this.answers())) {
      if (child.exitCode !== null) throw new Error(`sshd exited: ${this.output}`);
      if (Date.now() > deadline) throw new Error(`sshd did not answer on port ${this.port}: ${this.output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private async kill(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /** True once the port sends an SSH banner. */
  private answers(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(this.port, '127.0.0.1');
      const done = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.once('data', (d) => done(d.toString().startsWith('SSH-2.0')));
      socket.once('error', () => done(false));
      socket.setTimeout(1000, () => done(false));
    });
  }
}
