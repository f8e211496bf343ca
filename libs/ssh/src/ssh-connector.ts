import { Injectable } from '@nestjs/common';
import { Client, ConnectConfig } from 'ssh2';
import { hostKeyFingerprint, HostKeyMismatchError } from './host-key';

export type SshAuth = { privateKey: string; passphrase?: string } | { password: string };

/** Where and as whom to connect; `address` is the one the egress guard checked. */
export interface SshTarget {
  serverName: string;
  address: string;
  port: number;
  username: string;
  auth: SshAuth;
  /** The pinned host key; null on first connect (the key presented is accepted and reported). */
  pinnedFingerprint: string | null;
}

export interface SshConnection {
  client: Client;
  /** The host key the server presented (equal to the pin when there was one). */
  fingerprint: string;
}

export type SshConnectFailure = 'unreachable' | 'auth_failed' | 'timeout' | 'bad_key';

/** A connection that could not be made; the message is safe to show (no credentials in it). */
export class SshConnectError extends Error {
  constructor(
    readonly reason: SshConnectFailure,
    message: string,
  ) {
    super(message);
  }
}

/** The connection could not open a channel (it broke since it was pooled); nothing ran on it. */
export class ChannelOpenError extends Error {}

/** The ssh2 side of opening a connection: host-key check, auth, one deadline for all of it. */
@Injectable()
export class SshConnector {
  connect(target: SshTarget, timeoutMs: number): Promise<SshConnection> {
    return new Promise((resolve, reject) => {
      const client = new Client();
      let presented: string | undefined;
      let mismatch: HostKeyMismatchError | undefined;
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        client.end();
        reject(err);
      };
      // ssh2's readyTimeout covers the handshake only; this covers the TCP connect too.
      const deadline = setTimeout(
        () => fail(new SshConnectError('timeout', `no SSH connection to "${target.serverName}" within ${Math.round(timeoutMs / 1000)} s (server down or filtered?)`)),
        timeoutMs,
      );
      client.on('ready', () => {
        if (settled) return void client.end();
        settled = true;
        clearTimeout(deadline);
        resolve({ client, fingerprint: presented ?? '' });
      });
      client.on('error', (err: Error & { level?: string; code?: string }) => {
        if (mismatch) return fail(mismatch);
        fail(describe(target, err));
      });
      const config: ConnectConfig = {
        host: target.address,
        port: target.port,
        username: target.username,
        readyTimeout: timeoutMs,
        tryKeyboard: false,
        keepaliveInterval: 15_000,
        keepaliveCountMax: 3,
        hostVerifier: (key: Buffer) => {
          presented = hostKeyFingerprint(key);
          if (target.pinnedFingerprint && target.pinnedFingerprint !== presented) {
            mismatch = new HostKeyMismatchError(target.serverName, target.pinnedFingerprint, presented);
            return false;
          }
          return true;
        },
        ...('password' in target.auth ? { password: target.auth.password } : { privateKey: target.auth.privateKey, passphrase: target.auth.passphrase }),
      };
      try {
        client.connect(config);
      } catch (err) {
        // ssh2 parses the key synchronously; its message names no secret.
        fail(new SshConnectError('bad_key', `the private key of server "${target.serverName}" cannot be used: ${(err as Error).message}`));
      }
    });
  }
}

function describe(target: SshTarget, err: Error & { level?: string; code?: string }): SshConnectError {
  const where = `"${target.serverName}" (${target.address}:${target.port})`;
  if (err.level === 'client-authentication') return new SshConnectError('auth_failed', `server ${where} refused the credentials for user ${target.username}`);
  if (err.level === 'client-timeout') return new SshConnectError('timeout', `server ${where} did not complete the SSH handshake in time`);
  if (err.code === 'ECONNREFUSED') return new SshConnectError('unreachable', `server ${where} refused the connection (nothing listens on that port)`);
  return new SshConnectError('unreachable', `cannot connect to server ${where}: ${err.message}`);
}
