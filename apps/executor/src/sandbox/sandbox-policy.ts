import type { RunboxConfig } from '@app/config';

/**
 * What every sandbox container gets. Decided by the deployment, never by a tenant: the
 * tool-call contract has no field that could change any of it.
 */
export interface SandboxPolicy {
  image: string;
  memoryBytes: number;
  nanoCpus: number;
  pidsLimit: number;
  network: boolean;
  tmpfsSizeMb: number;
  /** Deadline of one glob/grep walk inside the container (the agent reads RUNBOX_FILE_SEARCH_TIMEOUT). */
  fileSearchTimeoutSeconds: number;
}

export function sandboxPolicyFrom(config: RunboxConfig): SandboxPolicy {
  return {
    image: config.RUNBOX_SANDBOX_IMAGE,
    memoryBytes: config.RUNBOX_SANDBOX_MEMORY_MB * 1024 * 1024,
    nanoCpus: Math.round(config.RUNBOX_SANDBOX_CPUS * 1e9),
    pidsLimit: config.RUNBOX_SANDBOX_PIDS,
    network: config.RUNBOX_SANDBOX_NETWORK,
    tmpfsSizeMb: 256,
    fileSearchTimeoutSeconds: config.RUNBOX_FILE_SEARCH_TIMEOUT,
  };
}

/** The sandbox user baked into the image (deploy/sandbox/Dockerfile): every tool process runs as it. */
export const SANDBOX_USER = '1000:1000';
/**
 * The agent and its relay: the container's root, holding only AGENT_CAPABILITIES, so no
 * process a tool starts (uid 1000, no capabilities) can signal, trace or impersonate them.
 */
export const AGENT_USER = '0:0';
/** Starting tools as the sandbox user (SETUID, SETGID) and stopping their process groups (KILL). */
export const AGENT_CAPABILITIES = ['SETUID', 'SETGID', 'KILL'];
/** A root-only (0700) tmpfs for the agent's socket: a tool process can neither enter nor replace it. */
export const AGENT_SOCKET_DIR = '/run/runbox';
export const WORKSPACE = '/workspace';
export const AGENT_COMMAND = ['python3', '-u', '/opt/runbox/runbox_agent.py'];
