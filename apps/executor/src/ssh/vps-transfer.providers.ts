import { RunboxConfig } from '@app/config';
import { EgressGuard, readTenantEgressRules } from '@app/egress';
import { PrismaService } from '@app/persistence';
import { CredentialCipher, SavedServerConnections, SavedServersRepository, SshConnectionPool, SshConnector } from '@app/ssh';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { SandboxService } from '../sandbox/sandbox.service';
import { VpsTransferHandler } from './vps-transfer.handler';
import { VpsTransferService } from './vps-transfer.service';
import { WorkspaceStreams } from './workspace-streams';

/**
 * The executor reads saved servers itself (tenant-scoped, row-level security) and opens
 * their credentials with its own RUNBOX_CREDENTIALS_KEY, so no secret ever travels on NATS.
 * Connections pass the same egress guard, with the tenant's domain rules, as in the gateway.
 */
export function createVpsTransferHandler(config: RunboxConfig, db: PrismaService, docker: Docker, sandboxes: SandboxService, logger: Logger): VpsTransferHandler {
  if (!config.RUNBOX_CREDENTIALS_KEY) return new VpsTransferHandler(sandboxes, undefined);
  const cipher = new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS);
  const egress = new EgressGuard({ allowPrivateHosts: config.RUNBOX_ALLOW_PRIVATE_HOSTS });
  const pool = new SshConnectionPool(new SshConnector(), logger);
  const connections = new SavedServerConnections(new SavedServersRepository(db), pool, cipher, egress, (tenantId) => readTenantEgressRules(db, tenantId));
  return new VpsTransferHandler(sandboxes, new VpsTransferService(connections, new WorkspaceStreams(docker)), pool);
}
