import { z } from 'zod';

/**
 * vps_upload and vps_download travel as tool calls (TOOL_CALL_SUBJECT, so they reach the
 * executor holding the session's workspace); these are their arguments, validated by the
 * gateway's tool definitions and again by the executor. The bytes never cross NATS: the
 * executor streams them between the workspace and SFTP.
 */
export const VPS_TRANSFER_TOOLS = ['vps_upload', 'vps_download'] as const;
export type VpsTransferTool = (typeof VPS_TRANSFER_TOOLS)[number];

/** The largest file either tool moves (seed 000). */
export const VPS_TRANSFER_CAP_BYTES = 256 * 1024 * 1024;

const serverName = z.string().min(1).max(64);
const workspacePath = z.string().min(1).max(4096);
const remotePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), 'no NUL bytes');

export const vpsUploadArgsSchema = z.object({ server: serverName, local_path: workspacePath, remote_path: remotePath }).strict();
export const vpsDownloadArgsSchema = z.object({ server: serverName, remote_path: remotePath, local_path: workspacePath }).strict();
export type VpsUploadArgs = z.infer<typeof vpsUploadArgsSchema>;
export type VpsDownloadArgs = z.infer<typeof vpsDownloadArgsSchema>;
