import { createHash } from 'node:crypto';

/** OpenSSH's fingerprint of a host key as sent in the handshake: `SHA256:` + unpadded base64. */
export function hostKeyFingerprint(key: Buffer): string {
  return `SHA256:${createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`;
}

/** The pinned key and the one the server presented differ: the connection was refused. */
export class HostKeyMismatchError extends Error {
  constructor(
    readonly serverName: string,
    readonly pinned: string,
    readonly presented: string,
  ) {
    super(
      `the host key of server "${serverName}" changed: pinned ${pinned}, presented ${presented}. ` +
        'The connection was refused. If the change is expected (the server was reinstalled), check the new fingerprint on the server ' +
        `(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and re-pin it with POST /v1/servers/{id}/repin.`,
    );
  }
}
