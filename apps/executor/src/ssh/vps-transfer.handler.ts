import { ToolResult, VPS_TRANSFER_TOOLS, VpsTransferTool, vpsDownloadArgsSchema, vpsUploadArgsSchema } from '@app/contracts';
import { OnModuleDestroy } from '@nestjs/common';
import { ServerUseError, SshConnectionPool } from '@app/ssh';
import { CallTarget, SandboxService } from '../sandbox/sandbox.service';
import { TransferFailedError, VpsTransferService } from './vps-transfer.service';

export function isVpsTransferTool(tool: string): tool is VpsTransferTool {
  return (VPS_TRANSFER_TOOLS as readonly string[]).includes(tool);
}

/**
 * The executor's side of vps_upload and vps_download, reached through the tool-call
 * subject: validates the arguments, lends the transfer the session's container, and turns
 * the outcome into a tool result. Without RUNBOX_CREDENTIALS_KEY there is no service.
 */
export class VpsTransferHandler implements OnModuleDestroy {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly transfers: VpsTransferService | undefined,
    private readonly pool?: SshConnectionPool,
  ) {}

  /** Closes the pooled SSH connections with the executor. */
  onModuleDestroy(): void {
    this.pool?.onModuleDestroy();
  }

  async handle(target: CallTarget, tool: VpsTransferTool, rawArgs: Record<string, unknown>, timeoutMs: number, startWithinMs?: number): Promise<ToolResult> {
    // The output budget the executor adds to every sandbox call is not a transfer argument.
    const { max_output_chars: _chars, max_output_bytes: _bytes, ...args } = rawArgs;
    if (!this.transfers) return failure('saved servers need RUNBOX_CREDENTIALS_KEY on the executor (the key that opens their credentials); the operator has not set it');
    try {
      if (tool === 'vps_upload') {
        const parsed = vpsUploadArgsSchema.parse(args);
        const done = await this.sandboxes.withContainer(target, (containerId) => this.transfers!.upload(target.tenantId, containerId, parsed, timeoutMs), startWithinMs);
        return success(`Uploaded ${done.localPath} to ${parsed.server}:${done.remotePath} (${done.size} bytes, sha256 ${done.sha256}).`, parsed.server, done);
      }
      const parsed = vpsDownloadArgsSchema.parse(args);
      const done = await this.sandboxes.withContainer(target, (containerId) => this.transfers!.download(target.tenantId, containerId, parsed, timeoutMs), startWithinMs);
      return success(`Downloaded ${parsed.server}:${done.remotePath} to ${done.localPath} (${done.size} bytes, sha256 ${done.sha256}).`, parsed.server, done);
    } catch (err) {
      if (err instanceof TransferFailedError || err instanceof ServerUseError) return failure(err.message);
      throw err;
    }
  }
}

function success(output: string, server: string, done: { size: number; sha256: string; localPath: string; remotePath: string }): ToolResult {
  return { output, metadata: { server, size: done.size, sha256: done.sha256, local_path: done.localPath, remote_path: done.remotePath }, is_error: false };
}

function failure(output: string): ToolResult {
  return { output, metadata: {}, is_error: true };
}
