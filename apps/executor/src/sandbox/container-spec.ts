import type { ContainerCreateOptions } from 'dockerode';
import { AGENT_CAPABILITIES, AGENT_COMMAND, AGENT_SOCKET_DIR, AGENT_USER, SANDBOX_USER, SandboxPolicy, WORKSPACE } from './sandbox-policy';

/**
 * The one definition of a sandbox container. Every field that matters for isolation is
 * fixed here from the deployment's policy; nothing in it comes from a tenant's request.
 */
export function hardenedContainerSpec(name: string, labels: Record<string, string>, volume: string, policy: SandboxPolicy): ContainerCreateOptions {
  return {
    name,
    Image: policy.image,
    Labels: labels,
    // The agent's identity; it starts every tool process as RUNBOX_TOOL_USER (docs/sandbox.md).
    User: AGENT_USER,
    WorkingDir: WORKSPACE,
    Cmd: [...AGENT_COMMAND, 'serve'],
    Env: [
      'HOME=/home/sandbox',
      'LANG=C.UTF-8',
      `RUNBOX_TOOL_USER=${SANDBOX_USER}`,
      `RUNBOX_AGENT_SOCKET=${AGENT_SOCKET_DIR}/agent.sock`,
      `RUNBOX_FILE_SEARCH_TIMEOUT=${policy.fileSearchTimeoutSeconds}`,
    ],
    NetworkDisabled: !policy.network,
    HostConfig: {
      // PID 1 reaps the orphans that background jobs leave behind.
      Init: true,
      CapDrop: ['ALL'],
      CapAdd: AGENT_CAPABILITIES,
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Tmpfs: {
        '/tmp': `rw,exec,nosuid,nodev,size=${policy.tmpfsSizeMb}m,mode=1777`,
        [AGENT_SOCKET_DIR]: 'rw,noexec,nosuid,nodev,size=64k,mode=0700',
      },
      // Docker creates the volume with these labels when it does not exist yet, and mounts
      // a kept one as it is: one API call instead of two on the cold path.
      Mounts: [{ Type: 'volume', Source: volume, Target: WORKSPACE, VolumeOptions: { NoCopy: false, Labels: labels, DriverConfig: { Name: 'local', Options: {} } } }],
      NetworkMode: policy.network ? 'bridge' : 'none',
      Memory: policy.memoryBytes,
      MemorySwap: policy.memoryBytes,
      NanoCpus: policy.nanoCpus,
      PidsLimit: policy.pidsLimit,
      Privileged: false,
      RestartPolicy: { Name: 'no' },
    },
  };
}
