import { Provider, Type } from '@nestjs/common';
import { SavedServersRepository, SshConnectionPool, SshConnector } from '@app/ssh';
import { GatewayTool } from '../tools/gateway-tool';
import { SESSION_TOOL_ROUTER } from '../tools/session-tool-router';
import { ServersController } from './servers.controller';
import { ServersService } from './servers.service';
import { SshSessionBackends } from './ssh-session-backends';
import { VpsRunTool } from './vps-run.tool';
import { VpsTransferTools } from './vps-transfer-tools';

/** Saved servers over SSH: vps_run (registered through GATEWAY_TOOLS; VpsTransferTools registers the other two) ... */
export const SERVER_TOOLS: Array<Type<GatewayTool>> = [VpsRunTool];

/** ... what they and the API need ... */
export const SERVERS_PROVIDERS: Provider[] = [SavedServersRepository, ServersService, SshConnector, SshConnectionPool, VpsTransferTools, SshSessionBackends, { provide: SESSION_TOOL_ROUTER, useExisting: SshSessionBackends }];

/** ... and the /v1/servers routes. */
export const SERVERS_CONTROLLERS = [ServersController];
