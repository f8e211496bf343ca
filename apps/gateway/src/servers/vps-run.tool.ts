import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { formatCommandOutput, runRemoteCommand } from './remote-command';
import { serverName } from './servers.schemas';
import { ServerUseError } from '@app/ssh';
import { ServersService } from './servers.service';

const DEFAULT_TIMEOUT_SECONDS = 120;
const MAX_TIMEOUT_SECONDS = 900;

const parameters = z
  .object({
    server: serverName.optional().describe('The saved server\'s name (as listed when you call vps_run without a command).'),
    command: z.string().min(1).max(100_000).optional().describe('A shell command for the server\'s login shell. Omit it to list the saved servers.'),
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(MAX_TIMEOUT_SECONDS)
      .optional()
      .describe(`Close the command's channel after this many seconds (default ${DEFAULT_TIMEOUT_SECONDS}, max ${MAX_TIMEOUT_SECONDS}: raise it for upgrades or service restarts).`),
  })
  .strict()
  .superRefine((a, ctx) => {
    if (a.command !== undefined && a.server === undefined) ctx.addIssue({ code: 'custom', path: ['server'], message: 'a command needs the server to run on' });
  });

type VpsRunArgs = z.infer<typeof parameters>;

/** vps_run: one command on a tenant's saved server over SSH, or the list of saved servers. */
@Injectable()
export class VpsRunTool implements GatewayTool {
  readonly definition = {
    name: 'vps_run',
    description:
      "Run a shell command on one of the tenant's saved servers over SSH (a VPS the user registered). Omit `command` to list the saved servers with their user, host and pinned host-key fingerprint. Each call is a fresh login shell: cd and exports do not carry over (chain with &&). The result has the command's exit_code, stdout and stderr. Use vps_upload / vps_download to move files between the workspace and the server.",
    parameters,
    mutating: true,
    // In no named toolset: reachable through `all`, `enabled` or `tools` (seed 000).
    toolsets: [],
    runsIn: 'gateway' as const,
    timeoutSeconds: MAX_TIMEOUT_SECONDS + 30,
  };

  constructor(private readonly servers: ServersService) {}

  unavailableReason(): string | undefined {
    return this.servers.unavailableReason();
  }

  async execute(ctx: GatewayToolContext, args: VpsRunArgs): Promise<GatewayToolResult> {
    try {
      if (args.command === undefined) return await this.list(ctx.tenantId);
      const server = await this.servers.byName(ctx.tenantId, args.server!);
      const timeoutSeconds = args.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS;
      const outcome = await this.servers.withConnection(ctx.tenantId, server, ({ client }) => runRemoteCommand(client, args.command!, timeoutSeconds * 1000));
      const output = formatCommandOutput(outcome, timeoutSeconds, ctx.maxOutputChars);
      const metadata = { server: server.name, exit_code: outcome.exitCode, signal: outcome.signal, timed_out: outcome.status === 'timed_out', duration_ms: outcome.durationMs };
      return outcome.status === 'timed_out' ? toolFailure(output, metadata) : toolOutput(output, metadata);
    } catch (err) {
      if (err instanceof ServerUseError) return toolFailure(err.message, { server: args.server });
      throw err;
    }
  }

  private async list(tenantId: string): Promise<GatewayToolResult> {
    const servers = await this.servers.list(tenantId);
    if (!servers.length) return toolOutput('No servers are saved for this tenant.', { count: 0, servers: [] });
    const lines = servers.map((s) => `${s.name}\t${s.username}@${s.host}:${s.port}\t${s.host_key_fingerprint ?? 'host key not pinned yet'}`);
    const listed = servers.map((s) => ({ name: s.name, host: s.host, port: s.port, username: s.username, host_key_fingerprint: s.host_key_fingerprint }));
    return toolOutput(lines.join('\n'), { count: servers.length, servers: listed });
  }
}
