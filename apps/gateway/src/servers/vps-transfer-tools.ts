import { vpsDownloadArgsSchema, vpsUploadArgsSchema } from '@app/contracts';
import { ToolDefinition } from '../tools/tool-definition';

/** A transfer of up to 256 MiB gets this long by default (limits.timeouts overrides it). */
const TRANSFER_TIMEOUT_SECONDS = 600;

/**
 * vps_upload and vps_download run in the executor that holds the session's workspace (they
 * go there as sandbox tool calls): it streams the file between the workspace and SFTP.
 */
export const VPS_UPLOAD_TOOL: ToolDefinition = {
  name: 'vps_upload',
  description:
    "Copy a workspace file to one of the tenant's saved servers over SFTP (up to 256 MiB). The remote file is replaced only once the whole file arrived. The result gives the size and SHA-256. A relative remote_path is relative to the login user's home directory.",
  parameters: vpsUploadArgsSchema.extend({
    server: vpsUploadArgsSchema.shape.server.describe('The saved server\'s name (vps_run without a command lists them).'),
    local_path: vpsUploadArgsSchema.shape.local_path.describe('The file in the workspace, relative to /workspace.'),
    remote_path: vpsUploadArgsSchema.shape.remote_path.describe('Where to put it on the server.'),
  }),
  mutating: true,
  toolsets: [],
  runsIn: 'sandbox',
  pathArgument: 'local_path',
  timeoutSeconds: TRANSFER_TIMEOUT_SECONDS,
};

export const VPS_DOWNLOAD_TOOL: ToolDefinition = {
  name: 'vps_download',
  description:
    "Copy a file from one of the tenant's saved servers into the workspace over SFTP (up to 256 MiB). The workspace file is replaced only once the whole file arrived. The result gives the size and SHA-256.",
  parameters: vpsDownloadArgsSchema.extend({
    server: vpsDownloadArgsSchema.shape.server.describe('The saved server\'s name (vps_run without a command lists them).'),
    remote_path: vpsDownloadArgsSchema.shape.remote_path.describe('The file on the server (relative: from the login user\'s home directory).'),
    local_path: vpsDownloadArgsSchema.shape.local_path.describe('Where to put it in the workspace, relative to /workspace.'),
  }),
  mutating: true,
  toolsets: [],
  runsIn: 'sandbox',
  pathArgument: 'local_path',
  timeoutSeconds: TRANSFER_TIMEOUT_SECONDS,
};
