import { Provider, Type } from '@nestjs/common';
import { GatewayTool } from '../tools/gateway-tool';
import { ServersController } from './servers.controller';
import { ServersRepository } from './servers.repository';
import { ServersService } from './servers.service';
import { SshConnectionPool } from './ssh-connection-pool';
import { SshConnector } from './ssh-connector';
import { VpsRunTool } from './vps-run.tool';

/** Saved servers over SSH: the vps_* tools (registered through GATEWAY_TOOLS) ... */
export const SERVER_TOOLS: Array<Type<GatewayTool>> = [VpsRunTool];

/** ... what they and the API need ... */
export const SERVERS_PROVIDERS: Provider[] = [ServersRepository, ServersService, SshConnector, SshConnectionPool];

/** ... and the /v1/servers routes. */
export const SERVERS_CONTROLLERS = [ServersController];
