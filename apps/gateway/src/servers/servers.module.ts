import { Module } from '@nestjs/common';
import { SavedServersRepository, SshConnectionPool, SshConnector } from '@app/ssh';
import { TenancyModule } from '../tenants/tenancy.module';
import { gatewayToolProviders, SANDBOX_TOOLS, SandboxToolContribution } from '../tools/gateway-tool';
import { ServersController } from './servers.controller';
import { ServersService } from './servers.service';
import { SshSessionBackends } from './ssh-session-backends';
import { VpsRunTool } from './vps-run.tool';
import { VPS_DOWNLOAD_TOOL, VPS_UPLOAD_TOOL } from './vps-transfer-tools';

/**
 * Saved servers over SSH: /v1/servers, vps_run (here, in the gateway), vps_upload and
 * vps_download (in the executor that holds the workspace), and the ssh session backend that
 * the tool router sends a bound session's terminal calls to (bound in the gateway module).
 */
@Module({
  imports: [TenancyModule],
  controllers: [ServersController],
  providers: [
    SavedServersRepository,
    ServersService,
    SshConnector,
    SshConnectionPool,
    SshSessionBackends,
    ...gatewayToolProviders(VpsRunTool),
    {
      // Run in the executor, but only where the credentials key is set: the same rule as vps_run.
      provide: SANDBOX_TOOLS,
      inject: [ServersService],
      useFactory: (servers: ServersService): SandboxToolContribution[] =>
        [VPS_UPLOAD_TOOL, VPS_DOWNLOAD_TOOL].map((definition) => ({ definition, unavailableReason: () => servers.unavailableReason() })),
    },
  ],
  exports: [SshSessionBackends],
})
export class ServersModule {}
